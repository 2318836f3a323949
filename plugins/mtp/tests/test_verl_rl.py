"""Trained MTP layers on verl's FSDP actor (``verl_rl.py``): the actor's loss is verl's real
``ppo_loss`` plus λ · mean_k L^k, L^k the depth-k cross-entropy of the response tokens summed per
sequence from the equations and divided by verl's global token count (``agg_loss`` token-mean) —
D = 3, a prompt shorter than k+1 (tokens without a source position count zero), padded and packed
model layouts; the MTP engine's training forwards (model type ``mtp_language_model``) carry the
losses in ``model_output``, its no-grad passes (log-prob, reference) none; the callback only for
FSDP runs that train the layers."""

from __future__ import annotations

import pickle

import pytest
import torch
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from verl.utils import tensordict_utils as tu
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.metric import AggregationType
from verl.workers.utils.losses import ppo_loss

from reasonrl.bridges.verl_actor_loss import LOSS_TIMING, ComposedActorLoss, actor_loss_terms
from reasonrl.callbacks import ActorLossTerm, StepCallback
from reasonrl.plugins.mtp.hf_model import MiMoConfig, MiMoForCausalLM
from reasonrl.plugins.mtp.tests.verl_layouts import engine_forward, engine_model_output, nested
from reasonrl.plugins.mtp.verl_rl import MTPLossTerm, MTPTrainingCallback, build

SMALL = dict(
    vocab_size=40,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)
DEPTHS, WEIGHT = 3, 0.3
PROMPTS, RESPONSES = (3, 2, 4), (4, 3, 5)


@pytest.fixture(scope="module")
def actor_config():
    with initialize_config_module("verl.trainer.config", version_base=None):
        config = compose(
            "ppo_trainer",
            overrides=["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", "data.max_response_length=5"],
        )
    return config.actor_rollout_ref.actor


@pytest.fixture
def mimo_model():
    torch.manual_seed(0)
    return MiMoForCausalLM(MiMoConfig(num_nextn_predict_layers=DEPTHS, **SMALL))


def actor_batch(model, packed: bool, mtp_loss_depths: int = DEPTHS):
    """A micro-batch as verl's FSDP actor holds it (left-padded prompts, right-padded responses,
    nested full sequences), the model run as verl's engine runs it, and its log-probs."""
    torch.manual_seed(1)
    prompts = [torch.randint(0, 40, (n,)) for n in PROMPTS]
    responses = [torch.randint(0, 40, (n,)) for n in RESPONSES]
    sequences = [torch.cat(pair) for pair in zip(prompts, responses)]
    lengths = [len(seq) for seq in sequences]
    width_p, width_r = max(PROMPTS), max(RESPONSES)
    prompt_pad = torch.stack([torch.cat([torch.zeros(width_p - len(p), dtype=torch.long), p]) for p in prompts])
    response_pad = torch.stack([torch.cat([r, torch.zeros(width_r - len(r), dtype=torch.long)]) for r in responses])
    attention = torch.stack(
        [
            torch.cat([torch.arange(width_p) >= width_p - len(p), torch.arange(width_r) < len(r)])
            for p, r in zip(prompts, responses)
        ]
    ).long()
    response_mask = attention[:, width_p:]
    log_probs, _ = engine_forward(model, sequences, packed)
    old = torch.stack(
        [
            torch.cat([log_probs.detach().split(lengths)[b][len(p) - 1 : -1], torch.zeros(width_r - len(r))])
            for b, (p, r) in enumerate(zip(prompts, responses))
        ]
    )
    data = tu.get_tensordict(
        {
            "input_ids": nested(sequences),
            "prompts": prompt_pad,
            "responses": response_pad,
            "attention_mask": attention,
            "response_mask": response_mask,
            "loss_mask": response_mask,
            "old_log_probs": old + 0.05 * torch.randn_like(old),
            "advantages": torch.randn(3, 1).expand(3, width_r).clone(),
        },
        non_tensor_dict={
            "dp_size": 1,
            "batch_num_tokens": int(response_mask.sum()),
            "global_batch_size": 3,
            "use_remove_padding": packed,
        },
    )
    return engine_model_output(model, sequences, data, packed, mtp_loss_depths), data, sequences


def composed(actor_config, *extra_terms):
    """The run's actor loss as trainer mode reasonrl_sync installs it: verl's ppo_loss + the MTP term."""
    return ComposedActorLoss(actor_config, [*extra_terms, ("mtp_training", MTPLossTerm(WEIGHT, DEPTHS))])


def expected_mtp_term(model, sequences):
    """λ · mean_k Σ_sequences Σ_{response tokens t_j, j ≥ k+1} CE_k / (response tokens in the batch)."""
    sums = torch.zeros(DEPTHS)
    for sequence, prompt in zip(sequences, PROMPTS):
        targets = (torch.arange(len(sequence)) >= prompt).long()
        losses = model.mtp_outputs(sequence[None], loss_mask=targets[None]).mtp.losses
        sums = sums + torch.stack([losses[k - 1] * targets[k + 1 :].sum() for k in range(1, DEPTHS + 1)])
    return WEIGHT * (sums / sum(RESPONSES)).mean()


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
def test_the_actor_loss_is_verls_ppo_loss_plus_the_mtp_term(actor_config, mimo_model, packed):
    loss_fn = pickle.loads(pickle.dumps(composed(actor_config)))  # as verl's set_loss_fn delivers it
    model_output, data, sequences = actor_batch(mimo_model, packed)
    plain, _ = ppo_loss(omega_conf_to_dataclass(actor_config), model_output, data)
    got, metrics = loss_fn(model_output, data)
    assert not any(key.startswith("mtp_") for key in model_output)  # taken out: verl keeps no copy
    with torch.no_grad():
        want = plain + expected_mtp_term(mimo_model, sequences)
    torch.testing.assert_close(got, want)
    assert {f"actor/mtp_{k}_loss" for k in (1, 2, 3)} <= set(metrics)
    got.backward()
    assert all(layer.input_proj.weight.grad.abs().sum() > 0 for layer in mimo_model.model.mtp_layers)


class ClipHighTerm(ActorLossTerm):
    """A per-step config term like the ε_pos_high schedule's: clip_ratio_high from the batch."""

    def adjust_config(self, config, data):
        # verl's config fields are frozen; a real term declares its field mutable (the objectives
        # plugin's policy_loss.eps_pos_high)
        object.__setattr__(config, "clip_ratio_high", tu.get_non_tensor_data(data, "test_clip_high", None))


def test_terms_compose_a_config_adjustment_and_an_additive_loss(actor_config, mimo_model):
    """Two plugins' terms in one loss: verl's ppo_loss on the config the first term adjusted (its
    clipping changes the loss), plus the second term's λ·mean_k L^k."""
    loss_fn = pickle.loads(pickle.dumps(composed(actor_config, ("clip_high", ClipHighTerm()))))
    model_output, data, sequences = actor_batch(mimo_model, packed=True)
    tu.assign_non_tensor_data(data, "test_clip_high", 0.001)
    adjusted = omega_conf_to_dataclass(actor_config)
    object.__setattr__(adjusted, "clip_ratio_high", 0.001)
    plain, _ = ppo_loss(omega_conf_to_dataclass(actor_config), model_output, data)
    clipped, _ = ppo_loss(adjusted, model_output, data)
    got, metrics = loss_fn(model_output, data)
    assert not torch.allclose(plain, clipped)  # the adjustment matters for this batch
    with torch.no_grad():
        want = clipped + expected_mtp_term(mimo_model, sequences)
    torch.testing.assert_close(got, want)
    assert "actor/mtp_1_loss" in metrics
    # each term's forward time, summed over the step's micro-batches when verl aggregates them
    for name in ("clip_high", "mtp_training"):
        timing = metrics[LOSS_TIMING + name]
        assert timing.aggregation == AggregationType.SUM and 0.0 <= timing.aggregate() < 60.0, (name, timing)


def test_callbacks_offer_terms_and_none_replaces_the_loss():
    callbacks = [
        ("mtp_training", MTPTrainingCallback(WEIGHT, DEPTHS)),
        ("other", StepCallback()),  # offers no term: the default
    ]
    terms = actor_loss_terms(callbacks)
    assert [name for name, _ in terms] == ["mtp_training"] and isinstance(terms[0][1], MTPLossTerm)


def test_the_model_returns_mtp_losses_only_when_asked():
    """Per call, not per class: no model-wide switch, nothing kept between forwards."""
    torch.manual_seed(0)
    model = MiMoForCausalLM(MiMoConfig(num_nextn_predict_layers=DEPTHS, **SMALL))
    ids = torch.randint(0, 40, (1, 8))
    assert getattr(model(input_ids=ids, use_cache=False), "mtp_token_losses", None) is None
    out = model(input_ids=ids, use_cache=False, mtp_loss_depths=2)
    assert len(out.mtp_token_losses) == len(out.mtp_token_valid) == 2
    assert getattr(model(input_ids=ids, use_cache=False), "mtp_token_losses", None) is None


def test_a_forward_without_mtp_losses_is_an_error(actor_config, mimo_model):
    model_output, data, _ = actor_batch(mimo_model, packed=True, mtp_loss_depths=0)  # verl's own engine
    with pytest.raises(RuntimeError, match="no MTP losses"):
        composed(actor_config)(model_output, data)


def test_the_callback_is_built_only_for_fsdp_runs_that_train_the_layers(tmp_path):
    (tmp_path / "config.json").write_text('{"model_type": "mimo", "num_nextn_predict_layers": 2}')

    def run(train, strategy="fsdp2"):
        return OmegaConf.create(
            {
                "reasonrl": {"mtp": {"enable": True, "train": train}},
                "actor_rollout_ref": {"model": {"path": str(tmp_path)}, "actor": {"strategy": strategy}},
            }
        )

    callback = build(run(True))
    assert isinstance(callback, MTPTrainingCallback) and (callback.weight, callback.depths) == (0.3, 2)
    assert build(run(False)) is None and build(run(True, "megatron")) is None


def test_the_mtp_engine_is_verls_fsdp_engine_under_its_own_model_type():
    from types import SimpleNamespace

    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead

    from reasonrl.compat.verl import engine_registered
    from reasonrl.plugins.mtp.verl_engine import MODEL_TYPE, fsdp_engine_class, register_engines, training_depths

    register_engines()
    register_engines()  # idempotent (verl's registry refuses a second registration)
    engine = fsdp_engine_class()
    assert issubclass(engine, FSDPEngineWithLMHead) and engine is not FSDPEngineWithLMHead
    assert all(engine_registered(MODEL_TYPE, b, d) is engine for b in ("fsdp", "fsdp2") for d in ("cuda", "cpu"))
    assert engine_registered("language_model", "fsdp2", "cuda") is FSDPEngineWithLMHead  # verl's own untouched

    def model_config(enable, train, layers=3):
        mtp = SimpleNamespace(enable=enable, enable_train=train)
        return SimpleNamespace(mtp=mtp, hf_config=SimpleNamespace(num_nextn_predict_layers=layers))

    assert training_depths(model_config(True, True)) == 3
    assert training_depths(model_config(True, False)) == 0  # MiMo RL: frozen layers, verl's engine behaviour
    assert training_depths(model_config(False, True)) == 0


def test_the_mtp_model_type_on_megatron_builds_the_devices_own_megatron_engine(monkeypatch):
    """On megatron the model type is verl's engine as is — whichever class is registered for the device
    when the engine is built (the cpu platform registers its engine after this plugin registered)."""
    from verl.workers.engine.base import BaseEngine, EngineRegistry

    from reasonrl.compat.verl import engine_registered
    from reasonrl.plugins.mtp.verl_engine import MODEL_TYPE, megatron_engine_class, register_engines

    register_engines()
    assert all(engine_registered(MODEL_TYPE, "megatron", d) is megatron_engine_class() for d in ("cuda", "cpu"))

    class RegisteredLater(BaseEngine):
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    monkeypatch.setenv("VERL_ENGINE_DEVICE", "later_device")
    monkeypatch.setitem(EngineRegistry._engines["language_model"]["megatron"], "later_device", RegisteredLater)
    engine = megatron_engine_class()(model_config="m", engine_config="e")
    assert type(engine) is RegisteredLater and engine.kwargs == {"model_config": "m", "engine_config": "e"}
