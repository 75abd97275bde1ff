"""The Lightning logger with a real `lightning.Trainer` on the CPU (a tiny module, nothing downloaded): the fit
lands in the ledger as an ad-hoc run with its hyperparameters, steps, loss, wall-clock and cost. Skipped where
Lightning is not installed (gpuledger does not depend on it)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (make test installs the CPU wheel from /opt/wheels)")
L = pytest.importorskip("lightning", reason="Lightning is not installed (`pip install lightning`; not a gpuledger dependency)")

from gpuledger.api import Ledger  # noqa: E402


class _Tiny(L.LightningModule):
    def __init__(self, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, _i):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("loss", loss)
        self.log("tokens", float((self.global_step + 1) * len(x)))
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


def test_a_lightning_fit_lands_in_the_ledger(tmp_path, monkeypatch):
    monkeypatch.delenv("GPULEDGER_RUN_ID", raising=False)
    monkeypatch.delenv("GPULEDGER_METRICS", raising=False)
    from gpuledger.integrations.lightning import GpuledgerLogger

    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 4, generator=g)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
    logger = GpuledgerLogger(project="lightning-tests", name="tiny", usd_per_hour=2.0)
    trainer = L.Trainer(max_steps=6, logger=logger, log_every_n_steps=1, accelerator="cpu", enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=str(tmp_path))
    trainer.fit(_Tiny(), data)
    done = logger.finished
    assert done is not None and done.stored and done.status == "succeeded", done
    runs = Ledger().runs(sweep="adhoc-lightning-tests")
    row = runs.row(0, named=True)
    assert row["run_id"] == done.run_id and row["wall_s"] > 0 and row["cost_usd"] == pytest.approx(2.0 * row["wall_s"] / 3600)
    finals = Ledger().final_metrics(done.run_id)
    assert finals["loss"] >= 0 and finals["tokens"] == 48.0
    lr = Ledger().sql(f"select params->>'$.lr' as lr from runs where run_id = '{done.run_id}'")["lr"].item()
    assert float(lr) == 0.05
