"""The one-line integrations with a real Transformers `Trainer` (a tiny random-weight GPT-2 on the CPU,
nothing downloaded): `report_to="gpuledger"` and `callbacks=[GpuledgerCallback()]` (a PEFT LoRA model)
land the training in the ledger as an ad-hoc run with tokens, steps, loss, eval loss, wall-clock and cost.

Needs torch and transformers (the CPU wheel: `make test` installs it from /opt/wheels when that folder
exists); skipped with that message otherwise."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: `uv pip install --find-links /opt/wheels "
                            "torch==2.13.0+cpu transformers peft` (make test does it when /opt/wheels exists)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed (see torch above)")

from gpuledger.api import Ledger  # noqa: E402
from gpuledger.report.weeks import current_week  # noqa: E402

SEQ, BATCH, STEPS = 16, 2, 4


class _Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, 64, (n, SEQ), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(SEQ, dtype=torch.long), "labels": self.ids[i]}


def _model():
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=64, n_positions=SEQ, n_embd=32, n_layer=1, n_head=2)
    return transformers.GPT2LMHeadModel(config)


def _args(tmp_path, **kw):
    return transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=STEPS, per_device_train_batch_size=BATCH, logging_steps=1,
        eval_strategy="steps", eval_steps=2, save_strategy="no", use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0, **kw)


def _run_row(run_id: str) -> dict:
    runs = Ledger().runs()
    return runs.filter(runs["run_id"] == run_id).row(0, named=True)


def _finals(run_id: str) -> dict:
    return dict(Ledger().sql(f"select name, value from final_metrics where run_id = '{run_id}'").rows())


def test_report_to_gpuledger_lands_the_training_in_the_ledger(tmp_path, monkeypatch):
    monkeypatch.delenv("GPULEDGER_RUN_ID", raising=False)
    monkeypatch.delenv("GPULEDGER_METRICS", raising=False)
    monkeypatch.setenv("GPULEDGER_ADHOC_PROJECT", "trainer-tests")
    import gpuledger.integrations.transformers as integration

    trainer = transformers.Trainer(model=_model(), args=_args(tmp_path, report_to="gpuledger", run_name="tiny-gpt2"),
                                   train_dataset=_Tokens(16, 1), eval_dataset=_Tokens(4, 2))
    callback = next(c for c in trainer.callback_handler.callbacks if isinstance(c, integration.GpuledgerCallback))
    trainer.train()
    done = callback.finished
    assert done is not None and done.stored, done
    row = _run_row(done.run_id)
    assert row["status"] == "succeeded" and row["launcher"] == "external" and row["project"] == "trainer-tests"
    assert row["wall_s"] > 0 and row["cost_usd"] > 0 and row["peak_rss_gib"] > 0
    assert row["accelerator"] in ("cpu", "unknown") or row["gpus"] >= 1
    finals = _finals(done.run_id)
    assert finals["tokens"] == STEPS * BATCH * SEQ  # the Trainer's own count, turned on by the callback
    assert finals["steps"] == STEPS and finals["loss"] > 0 and finals["eval_loss"] > 0 and "learning_rate" in finals
    steps = Ledger().sql(f"select count(distinct step) as n from metrics where run_id = '{done.run_id}' and name = 'loss'")
    assert steps["n"].item() == STEPS
    config = Ledger().sql(f"select params->>'$.method' as method, params->>'$.model_class' as cls from runs "
                          f"where run_id = '{done.run_id}'").row(0, named=True)
    assert config == {"method": "full", "cls": "GPT2LMHeadModel"}
    assert "trainer-tests" in Ledger().report_weekly(current_week()).markdown.read_text(encoding="utf-8")


def test_a_peft_lora_trainer_with_the_callback(tmp_path, monkeypatch):
    peft = pytest.importorskip("peft", reason="peft is not installed (see torch above)")
    monkeypatch.delenv("GPULEDGER_RUN_ID", raising=False)
    monkeypatch.delenv("GPULEDGER_METRICS", raising=False)
    from gpuledger.integrations.transformers import GpuledgerCallback

    model = peft.get_peft_model(_model(), peft.LoraConfig(r=4, target_modules=["c_attn"], fan_in_fan_out=True))
    callback = GpuledgerCallback(project="trainer-tests", name="tiny-lora", usd_per_hour=1.0)
    transformers.Trainer(model=model, args=_args(tmp_path), train_dataset=_Tokens(16, 3), eval_dataset=_Tokens(4, 4),
                         callbacks=[callback]).train()
    done = callback.finished
    assert done.stored and done.cost_usd == pytest.approx(done.wall_s / 3600)
    finals = _finals(done.run_id)
    assert finals["tokens"] == STEPS * BATCH * SEQ and finals["eval_loss"] > 0
    method = Ledger().sql(f"select params->>'$.method' as m from runs where run_id = '{done.run_id}'")["m"].item()
    assert method == "lora"
