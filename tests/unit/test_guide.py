"""docs/guide.md documents every setting of `gpuledger.settings.SETTINGS` (key and variable)."""

from __future__ import annotations

from gpuledger.settings import SETTINGS


def test_the_guide_names_every_setting_and_its_variable(repo_root):
    guide = (repo_root / "docs" / "guide.md").read_text(encoding="utf-8")
    rows = [line for line in guide.splitlines() if line.startswith("| `")]
    for setting in SETTINGS:
        row = next((r for r in rows if r.startswith(f"| `{setting.key}` |")), None)
        assert row is not None, f"docs/guide.md has no row for the setting {setting.key}"
        assert setting.env is None or f"`{setting.env}`" in row, (setting.key, setting.env)
