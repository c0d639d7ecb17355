"""TFDS builders as task data: loading a split, offline once prepared.

`data_dir` is passed to TFDS unchanged, so a directory prepared once (`tfds build` or an
earlier download) works offline. The families turn the records into their examples
(GLUE: `bert_tf.tasks.classification.glue`, SQuAD: `bert_tf.tasks.span.squad`, CoNLL-2003:
`bert_tf.tasks.token.conll`).
"""

from __future__ import annotations

import difflib

from bert_tf.tasks.features import TaskDataError


def check_tfds_name(name: str) -> None:
    """Raises TaskDataError listing close names when `name` is not a TFDS dataset/config."""
    import tensorflow_datasets as tfds

    builder_name, _, config = name.partition("/")
    builders = tfds.list_builders()
    if builder_name not in builders:
        close = difflib.get_close_matches(builder_name, builders, n=5, cutoff=0.6)
        raise TaskDataError(
            f"no TFDS dataset named {builder_name!r}"
            + (f"; did you mean {', '.join(close)}?" if close else "; see tfds.list_builders()")
        )
    if config:
        configs = [c.name for c in (tfds.builder_cls(builder_name).BUILDER_CONFIGS or [])]
        if configs and config not in configs:
            close = difflib.get_close_matches(config, configs, n=5, cutoff=0.5)
            raise TaskDataError(
                f"TFDS dataset {builder_name!r} has no config {config!r}; "
                + (f"did you mean {', '.join(f'{builder_name}/{c}' for c in close)}? " if close else "")
                + f"its configs are {configs}"
            )


def load_tfds(name: str, split: str, data_dir: str | None = None):
    """(tf.data.Dataset, info) of a TFDS split; a missing split is a TaskDataError naming the others."""
    import tensorflow_datasets as tfds

    check_tfds_name(name)
    builder = tfds.builder(name, data_dir=data_dir)
    if not builder.is_prepared():
        try:
            builder.download_and_prepare()
        except Exception as error:  # no network, a mirror down, a missing optional module: say what to do
            detail = str(error).splitlines()[0] if str(error) else ""
            raise TaskDataError(
                f"TFDS {name} is not prepared in {builder.data_dir} and could not be downloaded "
                f"({type(error).__name__}: {detail}); prepare it where there is a network "
                f"(tfds build {name} --data_dir=DIR) and pass --tfds_data_dir=DIR"
            ) from None
    splits = builder.info.splits
    if splits and split.split("[")[0] not in splits:  # (mocked datasets list none)
        raise TaskDataError(f"TFDS {name} has no split {split!r}; its splits are {sorted(splits)}")
    return builder.as_dataset(split=split), builder.info


def load_numpy(name: str, split: str, data_dir: str | None = None):
    """(records as NumPy dicts, DatasetInfo) of a TFDS split."""
    import tensorflow_datasets as tfds

    dataset, info = load_tfds(name, split, data_dir)
    return tfds.as_numpy(dataset), info
