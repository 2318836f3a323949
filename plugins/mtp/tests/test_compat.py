"""The mtp plugin's reach into vLLM's drafter: registered only where drafting is on and vLLM is
inside the drafter's range (``plugins/mtp/compat.py``)."""

from __future__ import annotations

from reasonrl import compat
from reasonrl.plugins.mtp import compat as mtp_compat


def fake_versions(monkeypatch, **versions: str) -> None:
    """Make reasonrl.compat see other installed versions (package -> version)."""
    real = compat.installed_version

    def installed(package: str, distributions: tuple[str, ...] = ()):
        return versions.get(package.replace("-", "_"), real(package, distributions))

    monkeypatch.setattr(compat, "installed_version", installed)


def test_the_mtp_drafter_is_registered_only_on_request(monkeypatch):
    monkeypatch.delenv(mtp_compat.MTP_DRAFTER_ENV, raising=False)
    assert "REASONRL_MTP_DRAFTER unset" in mtp_compat.mtp_drafter_active()
    monkeypatch.setenv(mtp_compat.MTP_DRAFTER_ENV, "multi_layer=False")
    assert mtp_compat.mtp_drafter_active() is not None
    monkeypatch.setenv(mtp_compat.MTP_DRAFTER_ENV, "multi_layer=True")
    assert mtp_compat.mtp_drafter_active() is None
    fake_versions(monkeypatch, vllm="0.33.0")
    reason = mtp_compat.mtp_drafter_active()
    assert "vllm 0.33.0 is installed" in reason and "vLLM's own MiMoMTPModel" in reason
    assert mtp_compat.first_pass_patch_skip_reason().startswith("it serves only reasonrl's multi-layer MTP drafter")
