"""Fixtures of tapegrad-elementwise's tests."""

import pytest
import tapegrad.testing


@pytest.fixture(scope="session")
def contract_reports():
    """The contract kit's report on every op and function of tapegrad-elementwise, by name:
    one run of ``check_plugin`` per session, checked as a whole by test_elementwise.py and
    op by op by test_elementwise_jvp_rules.py (which used to run the kit a second time, the
    same way). A failure of the kit fails every test that reads it."""
    return {r.name: r for r in tapegrad.testing.check_plugin("tapegrad-elementwise")}
