"""Build helpers for the MkDocs site (named in mkdocs.yml; not part of any distribution).

- MkDocs hooks: links from a page to a repository file outside ``docs/`` (written
  ``../examples/fit_sine.py`` so they also work when the Markdown is read on a forge) are
  checked to exist (a missing target is a warning, so ``mkdocs build --strict`` fails) and
  point, in the built site, at a copy of the file under ``repo/`` (or at
  ``<repo_url>/blob/main/<path>`` when ``repo_url`` is configured).
- ``DoctestFences``, a griffe extension for mkdocstrings: docstrings carry doctest examples
  (``>>> ...``) that Markdown would render as nested block quotes; it fences them as
  ``pycon`` code blocks. It also turns the signature line Cython embeds at the top of the
  compiled engine's method docstrings (``TensorBase.backward(self, gradient=None, ...)``)
  into the method's parameters, which inspection cannot see, and smooths two reST habits
  of the docstrings for Markdown (``text::`` before a literal block, ``J[k][i]`` read as a
  reference link).
"""

import ast
import logging
import os
import re

import griffe
from mkdocs.structure.files import File, InclusionLevel

log = logging.getLogger("mkdocs.plugins.tapegrad")

DOCS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(DOCS)
# A Markdown link or image whose target leaves docs/: ](../path#anchor)
_OUTSIDE_LINK = re.compile(r"\]\(\.\./([^)\s#]+)(#[^)\s]*)?\)")
_FENCE = re.compile(r"^(```|~~~)")


class _RepoFile(File):
    """A repository file copied verbatim into the site, never rendered as a page."""

    def is_documentation_page(self):
        return False

    def is_static_page(self):
        return False


def _outside_targets(markdown):
    """Repository paths that links in `markdown` point to outside docs/ (code blocks skipped)."""
    targets, in_code = [], False
    for line in markdown.splitlines():
        if _FENCE.match(line.lstrip()):
            in_code = not in_code
        elif not in_code:
            targets.extend(m.group(1) for m in _OUTSIDE_LINK.finditer(line))
    return targets


def on_files(files, config):
    if config.repo_url:
        return files
    wanted = set()
    for page in files.documentation_pages():
        wanted.update(_outside_targets(page.content_string))
    for path in sorted(wanted):
        source = os.path.join(REPO, path)
        if os.path.isfile(source) and files.get_file_from_path(f"repo/{path}") is None:
            with open(source, "rb") as f:
                content = f.read()
            files.append(_RepoFile.generated(config, f"repo/{path}", content=content,
                                             inclusion=InclusionLevel.INCLUDED))
    return files


def on_page_markdown(markdown, page, config, files):
    def rewrite(match):
        path, anchor = match.group(1), match.group(2) or ""
        if not os.path.isfile(os.path.join(REPO, path)):
            log.warning("Doc file '%s' links to '../%s', which is not a file of the repository",
                        page.file.src_uri, path)
            return match.group(0)
        if config.repo_url:
            return f"]({config.repo_url.rstrip('/')}/blob/main/{path}{anchor})"
        depth = page.file.src_uri.count("/")
        return f"]({'../' * depth}repo/{path}{anchor})"

    out, in_code = [], False
    for line in markdown.split("\n"):
        if _FENCE.match(line.lstrip()):
            in_code = not in_code
        elif not in_code:
            line = _OUTSIDE_LINK.sub(rewrite, line)
        out.append(line)
    return "\n".join(out)


# ---------------------------------------------------------------------------------------
# griffe extension (mkdocstrings' python handler: `extensions: [docs/mkdocs_hooks.py:DoctestFences]`)
# ---------------------------------------------------------------------------------------

_CYTHON_SIGNATURE = re.compile(r"^\w+(\.\w+)*\(.*\)(\s*->\s*.+)?$")


def fence_doctests(text):
    """Wrap each run of doctest lines (``>>>``, ``...`` and the output after them) in a
    ``pycon`` fence; leave everything else, including existing fences, unchanged."""
    lines = text.split("\n")
    out, i, in_fence = [], 0, False
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if _FENCE.match(stripped):
            in_fence = not in_fence
        if in_fence or not stripped.startswith(">>>"):
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(stripped)]
        block = []
        while i < len(lines) and lines[i].strip():
            block.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        if out and out[-1].strip():
            out.append("")
        out += [indent + "```pycon"] + [indent + b for b in block] + [indent + "```"]
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    """Runs once per loaded package, over every object in it (griffe calls `on_object`
    for members only, not for a package's own module docstring)."""

    def on_package(self, *, pkg, **kwargs):
        stack = [pkg]
        while stack:
            obj = stack.pop()
            if obj.is_alias:
                continue
            _rewrite_docstring(obj)
            stack.extend(obj.members.values())


def _rewrite_docstring(obj):
    doc = obj.docstring
    if doc is None:
        return
    value = doc.value
    first, _, rest = value.partition("\n")
    if obj.is_function and _CYTHON_SIGNATURE.match(first.strip()):
        _set_parameters(obj, first.strip())
        value = rest.lstrip("\n")
    if ">>>" in value:
        value = fence_doctests(value)
    doc.value = _escape_reference_links(_literal_blocks(value))


def _literal_blocks(text):
    """reST's "text::" before an indented block: Markdown shows the block as code
    already, so keep one colon."""
    return re.sub(r"(?m)(\S)::$(?=\n\n[ \t])", r"\1:", text)


def _set_parameters(func, signature):
    """Give an inspected Cython method the parameters of its embedded signature line
    (``TensorBase.backward(self, gradient=None, ...)``), which inspection cannot see."""
    try:
        tree = ast.parse(f"def f{signature[signature.index('('):]}: pass")
    except SyntaxError:
        return
    args = tree.body[0].args
    kind = griffe.ParameterKind
    params = []
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for i, (arg, default) in enumerate(zip(positional, defaults)):
        k = kind.positional_only if i < len(args.posonlyargs) else kind.positional_or_keyword
        params.append(griffe.Parameter(arg.arg, kind=k,
                                       default=None if default is None else ast.unparse(default)))
    if args.vararg:
        params.append(griffe.Parameter(args.vararg.arg, kind=kind.var_positional))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        params.append(griffe.Parameter(arg.arg, kind=kind.keyword_only,
                                       default=None if default is None else ast.unparse(default)))
    if args.kwarg:
        params.append(griffe.Parameter(args.kwarg.arg, kind=kind.var_keyword))
    func.parameters = griffe.Parameters(*params)


def _escape_reference_links(text):
    """`J[k][i]` in prose is an index, not a Markdown reference link (which autorefs would
    try to resolve): escape the second bracket outside code."""
    out, in_fence = [], False
    for line in text.split("\n"):
        if _FENCE.match(line.lstrip()):
            in_fence = not in_fence
        elif not in_fence and "][" in line:
            parts = line.split("`")
            parts[::2] = [p.replace("][", "]\\[") for p in parts[::2]]
            line = "`".join(parts)
        out.append(line)
    return "\n".join(out)
