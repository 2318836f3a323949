"""Replication + frozen fine-tune (MiMo §2.3): layers 2..k start as copies of layer 1, and training
them leaves the main model and layer 1 untouched; the λ schedule reaches the loss; acceptance and
the drafting replay count what they say on a model whose predictions are known."""

from __future__ import annotations

import torch

from reasonrl.plugins.mtp import toy
from reasonrl.plugins.mtp.core import WeightSchedule
from reasonrl.plugins.mtp.training import acceptance, replicate, simulate_drafting, train


def test_replicate_then_train_only_the_new_layers():
    model = toy.tiny_mimo(1, seed=0)
    replicate(model, 3)
    assert model.config.num_nextn_predict_layers == 3 and len(model.model.mtp_layers) == 3
    first = model.model.mtp_layers[0].state_dict()
    for layer in model.model.mtp_layers[1:]:
        assert all(torch.equal(value, layer.state_dict()[name]) for name, value in first.items())
        assert layer.input_proj.weight.data_ptr() != model.model.mtp_layers[0].input_proj.weight.data_ptr()
    frozen = {
        name: value.clone()
        for name, value in model.state_dict().items()
        if ".mtp_layers.1." not in name and ".mtp_layers.2." not in name
    }
    trained_before = model.model.mtp_layers[2].input_proj.weight.clone()
    logs = train(
        model,
        toy.motif_sequences(64, seed=1),
        3,
        batch_size=16,
        train_main=False,
        train_depths=(2, 3),
        main_in_loss=False,
        log_every=1,
        log=lambda line: None,
    )
    assert len(logs) == 3 and len(logs[0].depth_losses) == 3
    assert all(torch.equal(value, model.state_dict()[name]) for name, value in frozen.items())
    assert not torch.equal(trained_before, model.model.mtp_layers[2].input_proj.weight)


def test_training_uses_the_scheduled_weight():
    model = toy.tiny_mimo(1, seed=0)
    logs = train(
        model,
        toy.motif_sequences(64, seed=1),
        4,
        batch_size=16,
        schedule=WeightSchedule(0.3, 0.1, switch_at=3),
        log_every=1,
        log=lambda line: None,
    )
    assert [entry.weight for entry in logs] == [0.3, 0.3, 0.1, 0.1]


def test_acceptance_counts_what_it_says():
    model = toy.tiny_mimo(2, seed=3).eval()
    sequences = toy.motif_sequences(6, seed=4, length=20)
    report = acceptance(model, sequences, prompt_length=5)
    ids = torch.tensor(sequences)
    with torch.no_grad():
        out = model.mtp_outputs(ids)
    for k in (1, 2):
        guesses = out.mtp.logits[k - 1].argmax(-1)
        pairs = [(guesses[b, i].item(), sequences[b][i + k + 1]) for b in range(6) for i in range(5, 20 - k - 1)]
        assert abs(report["independent"][k - 1] - sum(g == t for g, t in pairs) / len(pairs)) < 1e-6
        # sampled: the main model's probability of the draft at the position that predicts it
        verifier = out.main_logits.float().softmax(-1)
        probs = [verifier[b, i + k, guesses[b, i]].item() for b in range(6) for i in range(5, 20 - k - 1)]
        assert abs(report["sampled"][k - 1] - sum(probs) / len(probs)) < 1e-6
    assert report["chained"][1] <= report["chained"][0] <= report["independent"][0]


def test_drafting_replay_advances_one_token_plus_the_accepted_drafts_per_round():
    model = toy.tiny_mimo(3, seed=5).eval()
    prompts = [row[:12] for row in toy.motif_sequences(4, seed=6)]
    outputs = [row[12:40] for row in toy.motif_sequences(4, seed=6)]
    rounds, accepted = simulate_drafting(model, prompts, outputs, 3)
    # each round moves past the target's own token plus the accepted drafts; the last round may end
    # one token short of or exactly at each output's end
    assert (
        sum(len(output) - 1 for output in outputs) <= rounds + sum(accepted) <= sum(len(output) for output in outputs)
    )
    assert accepted[2] <= accepted[1] <= accepted[0] <= rounds
