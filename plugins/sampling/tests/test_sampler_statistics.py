"""The samplers' guarantees, with fixed seeds (sampling issue acceptance): easy-pool share,
prioritized frequencies, Gaussian curriculum centre and batch composition, the
with-replacement epoch guarantee, exact resume from state, invalid options."""

from __future__ import annotations

import math

import numpy as np
import pytest

from reasonrl.api import build_sampler
from reasonrl.config import ConfigError
from reasonrl.state_io import digest, load_state, save_state


def test_easy_pool_share_is_alpha_within_three_sigma():
    prompts = list(range(200))
    sampler = build_sampler(["easy_pool", "dynamic"], prompts, alpha=0.1, seed=3)
    solved = set(range(50))  # a quarter of the pool always solved, the rest mixed
    drawn_easy = drawn = 0
    for step in range(400):
        batch = sampler.sample(32)
        easy_before = set(sampler.easy.members().tolist())
        if step >= 20:  # the solved prompts have all reached the easy pool by now
            assert easy_before == solved
            drawn += len(batch)
            drawn_easy += sum(p in easy_before for p in batch)
        sampler.update({p: [1.0] * 4 if p in solved else [1.0, 0.0, 0.0, 1.0] for p in batch})
    alpha, share = 0.1, drawn_easy / drawn
    sigma = math.sqrt(alpha * (1 - alpha) / drawn)
    assert abs(share - alpha) <= 3 * sigma, (share, sigma)


def test_easy_prompts_that_fail_move_back_to_the_normal_pool():
    sampler = build_sampler(["easy_pool"], list(range(10)), alpha=1.0, seed=0)
    sampler.update({3: [1.0, 1.0]})
    assert sampler.easy.members().tolist() == [3] and not sampler.selector.active[3]
    assert sampler.sample(1) == [3], "alpha = 1: every draw comes from the easy pool"
    sampler.update({3: [1.0, 0.0]})
    assert len(sampler.easy) == 0 and sampler.selector.active[3]
    assert sampler.metrics()["sampling/moved_back_from_easy"] == 1


#: 99.9% quantile of the chi-square distribution with 11 degrees of freedom (12 prompts)
CHI2_999_DF11 = 31.264


def chi_square(observed, expected) -> float:
    return float(((observed - expected) ** 2 / expected).sum())


def test_prioritized_frequencies_are_proportional_to_one_minus_success_rate():
    prompts = list(range(12))
    sampler = build_sampler("prioritized", prompts, seed=7, smoothing=0.0)
    successes = [0, 1, 1, 2, 3, 4, 5, 5, 6, 7, 8, 9]  # of 10 responses each
    true_rate = np.array(successes) / 10
    sampler.update({p: [1.0] * k + [0.0] * (10 - k) for p, k in zip(prompts, successes)})
    counts = np.bincount(np.asarray([p for _ in range(400) for p in sampler.sample(50)]), minlength=12)
    expected_share = (1 - true_rate) / (1 - true_rate).sum()
    assert chi_square(counts, counts.sum() * expected_share) < CHI2_999_DF11, counts
    # and the test can fail: against uniform frequencies the same counts are far off
    assert chi_square(counts, np.full(12, counts.sum() / 12)) > 10 * CHI2_999_DF11


def test_prioritized_smoothing_sets_the_priority_of_unseen_prompts():
    sampler = build_sampler("prioritized", [0, 1], seed=0, unseen_success=0.5, smoothing=2.0)
    sampler.update({0: [1.0, 1.0]})  # s_0 = (2 + 2·0.5) / (2 + 2) = 0.75; unseen s_1 = 0.5
    assert np.allclose(sampler.selector.tree.weights(), [0.25, 0.5])


def _gaussian(pass_rates, **options):
    return build_sampler(
        "gaussian_curriculum", list(range(len(pass_rates))), pass_rates=pass_rates, bins=8, width=0.15, **options
    )


def bin_counts(selector, positions) -> np.ndarray:
    """Drawn prompts per difficulty bin of the Gaussian selector."""
    return np.bincount(selector.bin_of[positions], minlength=len(selector.left))


def test_gaussian_centre_moves_monotonically_from_easy_to_hard_and_batches_match_the_target():
    pass_rates = np.repeat((np.arange(8) + 0.5) / 8, 1000)  # 1000 prompts per bin: counts always allow
    sampler = _gaussian(pass_rates, pace_steps=20, seed=1)
    centres = []
    for _ in range(25):
        batch = np.asarray(sampler.sample(64))
        centres.append(sampler.selector.centre)
        target = sampler.selector.targets(64, refill=False)
        assert (bin_counts(sampler.selector, batch) == target).all()
        # the fullest bin is the one nearest the centre
        assert target.sum() == 64 and abs((np.argmax(target) + 0.5) / 8 - centres[-1]) <= 1 / 16 + 1e-9
        assert not np.array_equal(np.sort(batch), batch), "shuffled inside the batch"
    assert centres[0] == 1.0 and centres[-1] == 0.0
    assert all(a >= b for a, b in zip(centres, centres[1:])) and centres[5] > centres[15]


def test_gaussian_short_bins_are_filled_from_the_largest_remaining_bins():
    pass_rates = np.concatenate([np.full(3, 0.95), np.full(40, 0.55), np.full(100, 0.05)])  # bins 7, 4, 0
    sampler = _gaussian(pass_rates, pace_steps=100, seed=2)  # centre 1.0: nearly all target on bin 7
    batch = np.asarray(sampler.sample(20))
    counts = bin_counts(sampler.selector, batch)
    assert counts[7] == 3, "the whole of the short bin"
    assert counts[0] == 17 - counts[4] - counts[5] - counts[6] and counts[0] >= 17 - counts[6] - counts[5] - counts[4]
    assert counts[0] > counts[4], "the remainder comes from the largest bin first"
    assert len(set(batch.tolist())) == 20


@pytest.mark.parametrize("batch_size", [1, 8])
def test_with_replacement_every_prompt_is_trained_once_per_epoch_despite_repeated_filtering(batch_size):
    prompts = list(range(60))
    failures_left = {p: p % 4 for p in prompts}  # 0..3 no-signal groups before a mixed one
    sampler = build_sampler("dynamic", prompts, seed=5, max_requeues=4)
    trained_in_epoch1, drawn_in_epoch1, epoch1_requeues = set(), 0, 0
    while True:
        batch = sampler.sample(batch_size)
        if sampler.epoch > 1:
            break
        drawn_in_epoch1 += len(batch)
        results = {}
        for p in batch:
            if failures_left[p] > 0:
                failures_left[p] -= 1
                results[p] = [0.0] * 4  # all wrong: filtered, goes back to the pool
            else:
                results[p] = [1.0, 0.0, 1.0, 0.0]
                trained_in_epoch1.add(p)
        sampler.update(results)
        epoch1_requeues += int(sampler.metrics()["sampling/requeued"])
    if batch_size == 1:
        assert trained_in_epoch1 == set(prompts), "every prompt trained within the first epoch"
    else:  # the last batch of the epoch may straddle: its filtered prompts are owed to epoch 1
        assert len(trained_in_epoch1) >= len(prompts) - batch_size
        owed = set(sampler.selector.carried.members().tolist())
        assert set(prompts) - trained_in_epoch1 <= owed | set(batch)
    planned = sum(p % 4 for p in prompts)
    # every filtered group went back to the pool (the straddling batch is not yet reported)
    assert planned - batch_size < epoch1_requeues <= planned
    assert drawn_in_epoch1 >= len(prompts) + epoch1_requeues - batch_size


def test_a_prompt_filtered_more_than_max_requeues_counts_as_consumed():
    sampler = build_sampler("dynamic", [0, 1, 2], seed=0, max_requeues=2)
    for _ in range(3):
        sampler.update({0: [0.0, 0.0]})
    m = sampler.metrics()
    assert m["sampling/requeued"] == 2 and m["sampling/consumed_without_training"] == 1


def test_curriculum_window_grows_from_the_easiest_prompts():
    pass_rates = np.linspace(1.0, 0.0, 100)  # prompt 0 easiest
    sampler = build_sampler(
        "curriculum", list(range(100)), pass_rates=pass_rates, pace_steps=10, start_fraction=0.2, seed=0
    )
    first = sampler.sample(10)
    assert max(first) < 20, "step 0 draws only from the easiest 20%"
    for _ in range(12):
        sampler.sample(10)
    assert sampler.selector.window == 100 and sampler.selector.centre == 0.0


def test_difficulty_filter_drops_prompts_at_or_above_the_threshold():
    rates = {"a": 0.75, "b": 0.5, "c": 1.0, "d": 0.74}
    sampler = build_sampler("difficulty_filter", list(rates), pass_rates=rates, seed=0)
    assert sorted(sampler.sample(2) + sampler.sample(2)) == ["b", "b", "d", "d"]  # two epochs of the kept prompts
    assert set(sampler.ids[sampler.selector.active].tolist()) == {"b", "d"}
    strict = build_sampler(
        "difficulty_filter", list(rates), pass_rates=rates, filter_threshold=0.75, filter_inclusive=False
    )
    assert set(strict.ids[strict.selector.active].tolist()) == {"a", "b", "d"}


@pytest.mark.parametrize(
    "names",
    [
        ["dynamic"],
        ["easy_pool", "dynamic"],
        ["prioritized", "easy_pool", "dynamic"],
        ["curriculum", "easy_pool", "dynamic"],
        ["curriculum", "prioritized", "easy_pool", "dynamic"],
        ["difficulty_filter", "gaussian_curriculum", "dynamic"],
    ],
)
def test_state_round_trip_continues_exactly(tmp_path, names):
    rng = np.random.default_rng(0)
    rates = rng.random(500)
    options = dict(pass_rates=rates, seed=11, pace_steps=30)

    def play(sampler, steps):
        out = []
        for _ in range(steps):
            batch = sampler.sample(16)
            sampler.update({p: (rng.random(4) < rates[p]).astype(float).tolist() for p in batch})
            out.append(batch)
        return out

    original = build_sampler(names, list(range(500)), **options)
    play(original, 10)
    saved = original.state_dict()
    save_state(tmp_path / "state.npz", saved)
    rng_state = rng.bit_generator.state
    expected = play(original, 10)
    restored = build_sampler(names, list(range(500)), **options)
    restored.load_state_dict(load_state(tmp_path / "state.npz"))
    assert digest(restored.state_dict()) == digest(saved)
    rng.bit_generator.state = rng_state
    assert play(restored, 10) == expected


@pytest.mark.parametrize(
    ("call", "key"),
    [
        (lambda: build_sampler("easy_pool", [1, 2], alpha=1.5), "reasonrl.sampling.alpha"),
        (lambda: build_sampler("easy_pool", [1, 2], alpha=-0.1), "reasonrl.sampling.alpha"),
        (lambda: build_sampler("nonsense", [1, 2]), "reasonrl.sampling.samplers"),
        (lambda: build_sampler("dynamic", []), "prompt_ids"),
        (lambda: build_sampler("dynamic", [1, 2], alhpa=0.1), "reasonrl.sampling.alhpa"),
        (lambda: build_sampler(["dynamic", "easy_pool"], [1, 2]), "reasonrl.sampling.samplers"),
        (
            lambda: build_sampler(["prioritized", "curriculum"], [1, 2], pass_rates=[0.1, 0.2], pace_steps=3),
            "reasonrl.sampling.samplers",
        ),
        (lambda: build_sampler("gaussian_curriculum", [1, 2], pace_steps=3), "reasonrl.sampling.samplers"),
        (lambda: build_sampler("gaussian_curriculum", [1, 2], pass_rates=[0.1, 0.2]), "reasonrl.sampling.pace_steps"),
        (
            lambda: build_sampler("difficulty_filter", [1, 2], pass_rates=[0.9, 1.0]),
            "reasonrl.sampling.filter_threshold",
        ),
        (lambda: build_sampler("difficulty_filter", [1, 2], pass_rates=[0.5, 1.5]), "pass_rates"),
    ],
)
def test_invalid_options_fail_at_build_naming_the_key(call, key):
    with pytest.raises(ConfigError) as error:
        call()
    assert error.value.key == key, str(error.value)


def test_a_scheduled_threshold_lowered_as_training_goes_keeps_ever_harder_prompts(tmp_path):
    """LongCat §3.4.1's STEM curriculum: the pass-rate threshold lowered step by step."""
    rates = {f"p{i}": i / 10 for i in range(10)}  # pass rates 0.0 .. 0.9
    options = dict(pass_rates=rates, seed=1, filter_threshold=1.0, filter_schedule=[[2, 0.6], [4, 0.3]])
    sampler = build_sampler("difficulty_filter", list(rates), **options)
    highest = []
    for batch in range(6):
        drawn = sampler.sample(3)
        highest.append(max(rates[p] for p in drawn))
        if batch == 4:
            saved = sampler.state_dict()
    assert highest[2] < 0.6 and highest[3] < 0.6 and highest[4] < 0.3 and highest[5] < 0.3
    assert max(highest[:2]) >= 0.6, "batches 0-1 draw from every prompt (threshold 1.0)"
    assert set(sampler.ids[sampler.kept].tolist()) == {"p0", "p1", "p2"}
    restored = build_sampler("difficulty_filter", list(rates), **options)
    restored.load_state_dict(saved)
    assert restored.kept.tolist() == sampler.kept.tolist()
    assert max(rates[p] for p in restored.sample(3)) < 0.3


def test_a_filter_schedule_is_checked():
    for schedule, said in (
        ([[2, 0.5], [1, 0.4]], "ascend"),
        ([[0, 1.5]], r"\[0, 1\]"),
        ([[0, 0.0]], "drops every one"),
        ([3], r"\[batch, threshold\] pairs"),
    ):
        with pytest.raises(ConfigError, match=said):
            build_sampler("difficulty_filter", ["a", "b"], pass_rates=[0.2, 0.5], filter_schedule=schedule)
    with pytest.raises(ConfigError, match="add difficulty_filter"):
        build_sampler("dynamic", ["a", "b"], filter_schedule=[[1, 0.5]])
