"""Fixtures of tapegrad-linalg's tests."""

import pytest
import tapegrad.testing


@pytest.fixture(scope="session")
def contract_reports():
    """The contract kit's report on every op and function of tapegrad-linalg, by name: one
    run of ``check_plugin`` per session, checked as a whole by test_linalg_plugin.py and op
    by op by test_linalg_jvp_rules.py (which used to run the kit a second time, the same
    way). A failure of the kit fails every test that reads it."""
    return {r.name: r for r in tapegrad.testing.check_plugin("tapegrad-linalg")}
