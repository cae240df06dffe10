"""Every hook a tapegrad plugin can implement.

A plugin is any object (usually a module) with functions marked ``@tapegrad.hookimpl``
and named after the specs below. Installed distributions announce theirs under the
entry-point group ``tapegrad``; notebooks and tests call ``tg.register_plugin(obj)``.

The hooks run once, when tapegrad is imported (or when a plugin is registered at run
time), in this order for each plugin: devices, ops, kernels, api. They fill one op table;
after that an op call is a direct table lookup and pluggy is never consulted again.

An implementation may accept fewer arguments than its spec names (pluggy passes only
those it asks for), so specs can grow without breaking plugins.
"""

import pluggy

hookspec = pluggy.HookspecMarker("tapegrad")


# ---------------------------------------------------------------------------------------
# Devices
# ---------------------------------------------------------------------------------------

@hookspec
def tapegrad_register_devices(registry):
    """Register the devices this plugin provides.

    Called before any op is registered. Call ``registry.register_device(device)`` with a
    subclass of ``tapegrad.Device`` that implements its array interface (allocation,
    host<->device transfer, copies). The core registers ``cpu`` through this same hook.
    Returns nothing.
    """


# ---------------------------------------------------------------------------------------
# Ops
# ---------------------------------------------------------------------------------------

@hookspec
def tapegrad_register_ops(registry):
    """Define the ops this plugin owns.

    Call ``registry.register_op(name, kernels=..., vjp=..., samples=...)`` once per op
    (see ``tapegrad.Registry.register_op``), and ``registry.register_function(name, fn)``
    for public functions composed of other ops. An op or function name another plugin
    already defined is an error naming both, unless ``override=True``. Returns nothing.
    """


@hookspec
def tapegrad_register_kernels(registry):
    """Add kernels for ops that another plugin defines.

    Called after every plugin's ops are registered. Call
    ``registry.register_kernel(op_name, device_name, fn)``; this is how a device plugin
    (the GPU) covers the elementwise ops. A kernel for an op no installed plugin defines
    is kept and attached if that op is registered later. Returns nothing.
    """


# ---------------------------------------------------------------------------------------
# Public names
# ---------------------------------------------------------------------------------------

@hookspec
def tapegrad_api():
    """Extra public names for the ``tapegrad`` namespace.

    Return a dict mapping names to objects (for example ``{"nn": nn_module}``); each
    becomes ``tg.<name>``. A name that is already taken is an error naming both plugins;
    private and dunder names (``_engine``, ``__version__``) are the core's own and refused.
    """
