"""Issue 43 item 4: a project nobody else can plant. A `gpuledger.toml`, a user settings file, the file
`$GPULEDGER_CONFIG` or `$GPULEDGER_PRICES` names, owned by another user (made so with os.chown: the
tests run as root) or writable by group/others, is refused in one line naming it and how to trust it
(`GPULEDGER_TRUSTED_PROJECTS`, as git's safe.directory); the same files owned by the user are read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuledger.cli import main
from gpuledger.settings import ENV_TRUSTED, UntrustedSettings, load_settings

OTHER_UID = 54321
SPEC = Path(__file__).resolve().parents[2] / "gpuledger" / "scaffold" / "specs" / "lora-grid.yaml"


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """Another user's gpuledger.toml in a shared folder above the user's work."""
    if os.geteuid() != 0:
        pytest.skip("making a file another user's needs root (os.chown)")
    shared = tmp_path / "shared"
    work = shared / "me" / "work"
    work.mkdir(parents=True)
    toml = shared / "gpuledger.toml"
    toml.write_text('[prices]\ndiscount_pct = {aws = 99.99}\n[paths]\ndata_dir = "theirs"\n', encoding="utf-8")
    os.chown(toml, OTHER_UID, OTHER_UID)
    for name in [k for k in os.environ if k.startswith("GPULEDGER_") and k != "GPULEDGER_MACHINE_FILE"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.chdir(work)
    return toml


def test_another_users_project_file_is_refused_with_how_to_trust_it(planted, capsys):
    with pytest.raises(UntrustedSettings) as info:
        load_settings()
    message = str(info.value)
    assert str(planted) in message and f"uid {OTHER_UID}" in message and ENV_TRUSTED in message
    for argv in (["plan", str(SPEC)], ["sql", "select 1"], ["prices", "--gpu", "H100"]):
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 1 and str(planted) in err and ENV_TRUSTED in err, (argv, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_trusted_folder_is_read(planted, monkeypatch):
    # control: the user says they trust it, as with git's safe.directory
    monkeypatch.setenv(ENV_TRUSTED, f"/nowhere{os.pathsep}{planted.parent}")
    s = load_settings()
    assert s.project_root == planted.parent and s.sources["paths.data_dir"] == "project file"
    monkeypatch.setenv(ENV_TRUSTED, "*")
    assert load_settings().project_root == planted.parent
    monkeypatch.setenv(ENV_TRUSTED, f"{planted.parent.parent}/*")
    assert load_settings().project_root == planted.parent


def test_ones_own_project_file_is_read(planted):
    os.chown(planted, os.geteuid(), os.getegid())  # control: the same file, the user's own
    os.chmod(planted, 0o644)
    assert load_settings().project_root == planted.parent


@pytest.mark.parametrize("mode, said", [(0o666, "every user"), (0o646, "every user"), (0o664, "its group")])
def test_a_project_file_others_may_write_is_refused(planted, mode, said):
    os.chown(planted, os.geteuid(), os.getegid())
    os.chmod(planted, mode)
    with pytest.raises(UntrustedSettings, match=said):
        load_settings()


def test_user_settings_and_files_named_by_variables_are_held_to_the_same(planted, tmp_path, monkeypatch):
    os.chown(planted, os.geteuid(), os.getegid())
    os.chmod(planted, 0o644)
    user = tmp_path / "home" / ".config" / "gpuledger" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('[paths]\nwarehouse = "/tmp/elsewhere.duckdb"\n', encoding="utf-8")
    assert load_settings().sources["paths.warehouse"] == "user file"  # control: one's own
    os.chown(user, OTHER_UID, OTHER_UID)
    with pytest.raises(UntrustedSettings, match="your settings file"):
        load_settings()
    named = tmp_path / "team.toml"
    named.write_text("[agent]\nbudget_usd = 1000000\n", encoding="utf-8")
    os.chmod(named, 0o666)
    monkeypatch.setenv("GPULEDGER_CONFIG", str(named))
    with pytest.raises(UntrustedSettings, match="GPULEDGER_CONFIG"):
        load_settings()
    os.chmod(named, 0o600)
    assert load_settings().values["agent.budget_usd"] == 1_000_000  # control
    prices = tmp_path / "prices.csv"
    prices.write_text("cloud,region,instance_type,accelerator,accelerator_count,usd_per_hour_on_demand\n"
                      "aws,us-east-1,p5.48xlarge,H100,8,50.0\n", encoding="utf-8")
    os.chown(prices, OTHER_UID, OTHER_UID)
    from gpuledger.catalog.pricing import load_offers

    monkeypatch.setenv("GPULEDGER_PRICES", str(prices))
    with pytest.raises(UntrustedSettings, match="GPULEDGER_PRICES"):
        load_offers()
    os.chown(prices, os.geteuid(), os.getegid())  # control: one's own price file is read
    assert load_offers().height > 100
