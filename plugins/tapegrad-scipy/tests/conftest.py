"""Fixtures of tapegrad-scipy's tests."""

import pytest
import tapegrad.testing


@pytest.fixture(scope="session")
def contract_reports():
    """The contract kit's report on every op and function of tapegrad-scipy, by name: one
    run of ``check_plugin`` per session, checked as a whole by test_scipy_plugin.py and op
    by op by test_scipy_jvp_rules.py (which used to run the kit a second time, the same
    way). A failure of the kit fails every test that reads it."""
    return {r.name: r for r in tapegrad.testing.check_plugin("tapegrad-scipy")}
