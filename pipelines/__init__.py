"""Pretraining data: the embedded corpus, offline TFRecords and online tf.data batches.

`pipelines.pretraining_dataset` is imported lazily so that `pipelines.corpus` and the
command-line tools start without loading TensorFlow first.
"""


def __getattr__(name):
    if name == "pretraining_dataset":
        # lazy: `import pipelines.corpus` loads no TensorFlow
        from pipelines.dataset import pretraining_dataset

        return pretraining_dataset
    raise AttributeError(f"module 'pipelines' has no attribute {name!r}")


__all__ = ["pretraining_dataset"]
