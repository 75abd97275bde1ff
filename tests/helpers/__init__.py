"""Helpers of the test suite (not tests), imported as `helpers.<module>`: tests/conftest.py puts tests/
on the path.

    record_fixtures    example_record(...): a valid result record; ingest_known(...)
    report_fixtures    small literal warehouses for the report tests; golden files
    demo_warehouse     build_demo_warehouse(path): every view populated (the views.yml column tests)
    sweep_specs        sweep_spec(...), trial_script(...): specs and trial scripts written to a folder
    adaptive_sweeps    the ASHA/grid/TPE sweeps of the adaptive report tests; run_sweep(..., curve=...)
    fake_launcher      FakeLauncher: in-process, deterministic; reports a curve one value per poll
    sky_offline        SkyPilot's own code against a stubbed cloud (no network)
    browser            headless Chromium (integration tests only)
    postgres           a throw-away PostgreSQL server (integration tests only)
    prefect_server     one Prefect API server per test session, for tests that need one but do not test it
                       (fixture `prefect_api_url`, tests/integration/conftest.py; integration tests only)
"""
