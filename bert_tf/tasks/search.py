"""Runs of several fine-tunings: a search for the recipe (`--search=N`) and seeds (`--seeds=K`).

A search compares `--search=N` recipes (learning rate, batch size, seed, drawn by Keras Tuner)
by successive halving, Hyperband's most aggressive bracket: every recipe trains on the schedule
of the last of `--search_epochs` (1, 3, 9 by default) but pauses after the first; the best third
go on from their backups to the second, and so on, until the last rung's runs finish. Each run
is scored on the eval data after every epoch, stopped early and kept at its best evaluation; it
lives in OUTPUT_DIR/search/trial_<id>/run of the trial that started it. Short runs weed out the
poor recipes, so a search of N recipes costs far less than N whole runs. Keras Tuner keeps each
trial's state in its folder, so the same command continues a search that was stopped: finished
trials are read back, the one that was running resumes from its backup. The best finished run's
model becomes OUTPUT_DIR/model, and OUTPUT_DIR/search_trials.tsv holds the table of trials
(also said in the log and drawn on the run's plot, `python -m bert_tf.plot`).

Seeds run one recipe K times from seeds `--seed`, `--seed` + 1, ... in OUTPUT_DIR/seeds/seed_<s>:
eval_results.json reports each metric's mean and standard deviation, and the model of the
seed that scored best on the eval data is kept (its score alone is an optimistic figure).
With both, the seeds run the recipe the search chose. Data to predict is predicted once, by
the model kept.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time

import numpy as np

from bert_tf import fileio
from bert_tf.errors import UsageError
from bert_tf.outputs import check_output
from bert_tf.tasks import runner
from bert_tf.tasks.settings import FinetuneSettings
from bert_tf.training import progress

logger = logging.getLogger(__name__)

SEARCH_DIR = "search"  # Keras Tuner's project: oracle.json, trial_<id>/ (trial.json, run/)
SEEDS_DIR = "seeds"
PREDICTIONS_DIR = "predictions"  # --predict_file's outputs, by the model kept
TRIALS_FILE = "search_trials.tsv"
SEEDS_FILE = "seeds.tsv"
SEARCH_SPLIT = "search"  # the trials' scores in metrics.jsonl, one report per trial
RUN_FIELDS = ("learning_rate", "num_train_epochs", "train_batch_size", "seed")
DEFAULT_PATIENCE = 2  # a trial stops after this many epochs without a better score


def run(settings: FinetuneSettings) -> dict[str, float]:
    """A fine-tuning: a search and/or seeds (see the module's docstring), or else one run
    (`runner.run`); returns eval_results.json's values."""
    if not (settings.search or settings.seeds > 1):
        return runner.run(settings)
    _check(settings)
    state = check_output(
        settings.output_dir, "--output_dir", overwrite=settings.overwrite, finished=runner.FINISHED
    )
    if state == "overwrite" or settings.overwrite:
        _remove_earlier(settings.output_dir)
    fileio.makedirs(settings.output_dir)
    recipe = dataclasses.replace(settings, predict_file=None, search=None, seeds=1, overwrite=False)
    metric = _main_metric(settings)  # builds the family once: it compares every run
    if settings.search:
        recipe, results, model_dir = _search(recipe, settings.search, metric)
    if settings.seeds > 1:
        results, model_dir = _seeds(recipe, settings.seeds, metric)
    if settings.save_model:
        _keep(model_dir, settings.output_dir)
        model_dir = fileio.join(settings.output_dir, runner.MODEL_DIR)
    fileio.write_json(fileio.join(settings.output_dir, "eval_results.json"), results)
    if settings.predict_file:
        _predict(settings, model_dir)
    logger.info(
        "the chosen recipe: %s; its model in %s",
        ", ".join(
            f"--{name}={getattr(recipe, name)}" for name in RUN_FIELDS if getattr(recipe, name) is not None
        ),
        model_dir,
    )
    return results


def _remove_earlier(output_dir: str) -> None:
    """--overwrite: what an earlier search or seeds wrote goes, before anything is written."""
    for name in (SEARCH_DIR, SEEDS_DIR, PREDICTIONS_DIR, *runner.FINISHED, TRIALS_FILE, SEEDS_FILE):
        path = fileio.join(output_dir, name)
        if fileio.isdir(path):
            fileio.rmtree(path)
        elif fileio.exists(path):
            fileio.remove(path)
    progress.remove_metrics(output_dir)


def _check(settings: FinetuneSettings) -> None:
    """What a search or seeds need, before anything is written."""
    flag = "--search" if settings.search else "--seeds"
    if settings.data_dir or settings.tfds_name:
        raise UsageError(
            f"{flag} reads its data from files: give --train_file and --eval_file (and --predict_file), "
            "not --data_dir or --tfds_name"
        )
    if not settings.train_file:
        raise UsageError(f"{flag} fine-tunes several times: give training data (--train_file)")
    if not settings.eval_file:
        raise UsageError(
            f"{flag} compares runs by their score on the eval data: give --eval_file (a dev set held "
            "out of the training data)"
        )
    if settings.search and len(settings.search_epochs) > 1 and settings.eval_every_steps == 0:
        raise UsageError(
            "--search compares its trials after each of --search_epochs by their scores during training: "
            "leave --eval_every_steps unset (every epoch), or give one --search_epochs"
        )


# -- search ----------------------------------------------------------------------------------
HALVING = 3  # each rung keeps the best third (Keras Tuner's Hyperband factor)


def _search(
    settings: FinetuneSettings, trials: int, metric: str
) -> tuple[FinetuneSettings, dict[str, float], str]:
    """Successive halving of `trials` recipes, best by `metric`; (the chosen run's settings,
    its eval results, its model folder)."""
    import keras_tuner

    rungs = settings.search_epochs
    tuner = _tuner_class(keras_tuner)(
        settings=settings,
        oracle=_oracle_class(keras_tuner)(
            trials,
            rungs,
            objective=keras_tuner.Objective(metric, direction="max"),
            hyperparameters=_space(keras_tuner, settings),
            seed=settings.seed,
            max_consecutive_failed_trials=1,  # a trial's error (bad data, ...) stops the search
        ),
        directory=settings.output_dir,
        project_name=SEARCH_DIR,
        overwrite=False,  # the same command continues a stopped search
    )
    done = sum(t.status == "COMPLETED" for t in tuner.oracle.trials.values())
    if done:
        logger.info("search: %d trials were finished before; continuing", done)
    tuner.search(verbose=0)  # its own progress lines: the runs log theirs
    completed = [t for t in tuner.oracle.trials.values() if t.status == "COMPLETED"]
    # The candidates: runs that finished (the last rung's, or stopped early), with a model,
    # each by its last trial (its score is the run's best evaluation).
    last = {}
    for trial in sorted(completed, key=lambda t: t.hyperparameters.values["tuner/epochs"]):
        last[_run_dir(tuner.oracle, settings, trial)] = trial
    finished = [trial for run_dir, trial in last.items() if runner.is_finished(run_dir)]
    if not finished:
        raise UsageError("the search finished no trial; see the errors above")
    best = max(finished, key=lambda t: t.score)
    for run_dir in last:  # the paused runs' backups: only a continuation needed them
        fileio.rmtree(fileio.join(run_dir, runner.BACKUP_DIR))
    _report_trials(settings, tuner.oracle, completed, best, metric)
    chosen = dataclasses.replace(settings, **_recipe(best.hyperparameters.values, rungs))
    run_dir = _run_dir(tuner.oracle, settings, best)
    results = fileio.read_json(fileio.join(run_dir, "eval_results.json"))
    results = {**results, "search_trials": float(len(completed))}
    return chosen, results, fileio.join(run_dir, runner.MODEL_DIR)


def _space(keras_tuner, settings: FinetuneSettings):
    space = keras_tuner.HyperParameters()
    for name, choices in settings.search_space().items():
        space.Choice(name, list(choices))
    space.Int("seed", 0, 9999)
    return space


def _oracle_class(keras_tuner):
    class HalvingOracle(keras_tuner.oracles.HyperbandOracle):
        """Hyperband's most aggressive bracket alone (successive halving): `trials` recipes
        train to `rungs[0]` epochs, the best `1 / HALVING` of them go on to `rungs[1]`, ...,
        one (at least) to the last."""

        def __init__(self, trials: int, rungs: tuple[float, ...], **kwargs):
            self.num_recipes, self.rungs = trials, rungs  # read by the constructor below
            super().__init__(max_epochs=rungs[-1], factor=HALVING, hyperband_iterations=1, **kwargs)

        def _get_num_brackets(self):
            return 1

        def _get_num_rounds(self, bracket_num):
            return len(self.rungs)

        def _get_size(self, bracket_num, round_num):
            return math.ceil(self.num_recipes / HALVING**round_num)

        def _get_epochs(self, bracket_num, round_num):
            return self.rungs[round_num]

    return HalvingOracle


def _tuner_class(keras_tuner):
    class FinetuningTuner(keras_tuner.Tuner):
        """Each trial trains a recipe's run to its rung: a new run, or the run of the trial
        it continues (`tuner/trial_id`), from that run's backup."""

        def __init__(self, settings, **kwargs):
            self.settings = settings
            super().__init__(**kwargs)

        def run_trial(self, trial, *args, **kwargs):
            values = trial.hyperparameters.values
            recipe = _recipe(values, self.settings.search_epochs)
            epochs = values["tuner/epochs"]
            logger.info(
                "search: trial %s: %s, to epoch %g%s",
                trial.trial_id,
                _describe(recipe),
                epochs,
                f" (continuing trial {values['tuner/trial_id']})" if "tuner/trial_id" in values else "",
            )
            last = epochs >= self.settings.search_epochs[-1]
            return _run_once(
                self.settings,
                _run_dir(self.oracle, self.settings, trial),
                seconds_file=_seconds_file(self.settings, trial.trial_id),
                pause_after_epochs=None if last else epochs,
                **recipe,
            )

    return FinetuningTuner


def _first(oracle, trial):
    """The trial that started the run `trial` continues (itself for a new run)."""
    while "tuner/trial_id" in trial.hyperparameters.values:
        trial = oracle.trials[trial.hyperparameters.values["tuner/trial_id"]]
    return trial


def _run_dir(oracle, settings: FinetuneSettings, trial) -> str:
    return fileio.join(settings.output_dir, SEARCH_DIR, f"trial_{_first(oracle, trial).trial_id}", "run")


def _seconds_file(settings: FinetuneSettings, trial_id: str) -> str:
    """How long the trial took, beside it (read back for the table of trials)."""
    return fileio.join(settings.output_dir, SEARCH_DIR, f"trial_{trial_id}", "seconds.json")


def _recipe(values: dict, rungs: tuple[float, ...]) -> dict:
    return {
        "learning_rate": float(values["learning_rate"]),
        "num_train_epochs": float(rungs[-1]),
        "train_batch_size": int(values["train_batch_size"]),
        "seed": int(values["seed"]),
    }


def _describe(values: dict) -> str:
    return ", ".join(f"{name}={values[name]:g}" for name in RUN_FIELDS if name in values)


def _report_trials(settings, oracle, trials, best, metric: str) -> None:
    """The table of trials: in the log, in OUTPUT_DIR/search_trials.tsv and in metrics.jsonl."""
    header = ["trial", "run", "learning_rate", "train_batch_size", "seed", "epochs", metric, "seconds"]
    log = progress.ScalarLog(
        settings.output_dir, SEARCH_SPLIT, fileio.join(progress.log_dir(settings.output_dir), SEARCH_SPLIT)
    )
    rows = []
    for number, trial in enumerate(sorted(trials, key=lambda t: t.trial_id)):
        values = trial.hyperparameters.values
        recipe = _recipe(values, settings.search_epochs)
        seconds = fileio.read_json(_seconds_file(settings, trial.trial_id))
        rows.append(
            [
                trial.trial_id,
                _first(oracle, trial).trial_id,
                *(f"{recipe[name]:g}" for name in ("learning_rate", "train_batch_size", "seed")),
                f"{float(values['tuner/epochs']):g}",
                f"{trial.score:.4f}",
                f"{seconds:.0f}",
            ]
        )
        log.write(number, {metric: trial.score, "learning_rate": recipe["learning_rate"]})
    log.close()
    _write_table(settings.output_dir, TRIALS_FILE, header, rows)
    logger.info(
        "search: %d trials (best: trial %s, %s %.4f)\n%s",
        len(trials),
        best.trial_id,
        metric,
        best.score,
        _table(header, rows),
    )


# -- seeds ---------------------------------------------------------------------------------
def _seeds(settings: FinetuneSettings, count: int, metric: str) -> tuple[dict[str, float], str]:
    """Runs the recipe from `count` seeds; (mean and spread of each score, the best seed's model folder)."""
    runs = {}
    for seed in range(settings.seed, settings.seed + count):
        run_dir = fileio.join(settings.output_dir, SEEDS_DIR, f"seed_{seed}")
        logger.info("seeds: run %d of %d (--seed=%d)", seed - settings.seed + 1, count, seed)
        _run_once(dataclasses.replace(settings, seed=seed), run_dir)
        runs[seed] = fileio.read_json(fileio.join(run_dir, "eval_results.json"))
    names = [n for n in runs[settings.seed] if not _is_baseline(n)]
    results: dict[str, float] = {}
    for name in names:
        values = np.array([scores[name] for scores in runs.values()], dtype=np.float64)
        results[f"{name}_mean"], results[f"{name}_std"] = float(values.mean()), float(values.std(ddof=1))
    results.update({n: v for n, v in runs[settings.seed].items() if _is_baseline(n)})
    results["seeds"] = float(count)
    best = max(runs, key=lambda seed: runs[seed][metric])
    header = ["seed", *names]
    rows = [[str(seed), *(f"{scores[n]:.4f}" for n in names)] for seed, scores in runs.items()]
    _write_table(settings.output_dir, SEEDS_FILE, header, rows)
    logger.info(
        "seeds: %s %.4f ± %.4f (mean ± standard deviation of %d seeds); the model kept is seed %d's "
        "(%s %.4f: the best of %d, an optimistic figure)\n%s",
        metric,
        results[f"{metric}_mean"],
        results[f"{metric}_std"],
        count,
        best,
        metric,
        runs[best][metric],
        count,
        _table(header, rows),
    )
    return results, fileio.join(settings.output_dir, SEEDS_DIR, f"seed_{best}", runner.MODEL_DIR)


def _is_baseline(name: str) -> bool:
    return name.startswith(("majority_baseline", "bag_of_words_"))


# -- shared ----------------------------------------------------------------------------------
def _main_metric(settings: FinetuneSettings) -> str:
    """The metric that compares runs: the family's main metric (known once a family is built)."""
    family, _ = runner._family(
        settings, runner.get_strategy(settings.strategy, settings.tpu, settings.num_gpus)
    )
    return runner.main_metric(family)


def _run_once(
    settings: FinetuneSettings,
    run_dir: str,
    seconds_file: str | None = None,
    pause_after_epochs: float | None = None,
    **recipe,
) -> dict[str, float]:
    """One fine-tuning run in `run_dir` (continued where it was stopped; read back when it
    finished before), scored on the eval data after every epoch and kept at its best; paused
    after `pause_after_epochs` (`runner.run`)."""
    import keras

    if runner.is_finished(run_dir):
        return fileio.read_json(fileio.join(run_dir, "eval_results.json"))
    if settings.eval_every_steps != 0:  # scored while it trains: stopped early, kept at its best
        recipe = {
            "early_stopping_patience": settings.early_stopping_patience or DEFAULT_PATIENCE,
            "keep_best_model": True,
            **recipe,
        }
    # Each run saves its model: the chosen one is kept (as OUTPUT_DIR/model, unless --nosave_model).
    one = dataclasses.replace(settings, **recipe, output_dir=run_dir, save_model=True)
    started = time.monotonic()
    try:
        results = runner.run(one, pause_after_epochs=pause_after_epochs)
    finally:
        keras.backend.clear_session()  # each run builds its own model
    if seconds_file:  # a search trial's: its table says how long each took
        fileio.write_json(seconds_file, time.monotonic() - started)
    return results


def _keep(model_dir: str, output_dir: str) -> None:
    """The chosen run's model becomes OUTPUT_DIR/model, whole or not at all."""
    target = fileio.join(output_dir, runner.MODEL_DIR)
    if fileio.is_local(target):
        fileio.publish_folder(model_dir, target)
    else:
        fileio.rmtree(target)
        fileio.copy_tree(model_dir, target, last=("task.json",))


def _predict(settings: FinetuneSettings, model_dir: str) -> None:
    """The data to predict, predicted once, by the model kept (into OUTPUT_DIR/predictions)."""
    runner.run(
        dataclasses.replace(
            settings,
            init_checkpoint=model_dir,
            train_file=None,
            eval_file=None,
            output_dir=fileio.join(settings.output_dir, PREDICTIONS_DIR),
            search=None,
            seeds=1,
            overwrite=True,
        )
    )


def _write_table(output_dir: str, name: str, header: list[str], rows: list[list[str]]) -> None:
    lines = ["\t".join(header), *("\t".join(row) for row in rows)]
    fileio.write_text(fileio.join(output_dir, name), "\n".join(lines) + "\n")


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(str(cell).rjust(width) for cell, width in zip(row, widths, strict=True))
        for row in [header, *rows]
    )
