"""Builds tests/fixtures/hf_tiny: a small random Hugging Face `BertForPreTraining` with its
inputs and outputs, so the parity tests run without torch.

Run once, with torch and transformers installed (not needed by bert_tf or its tests):

    /work/venv-torch/bin/python tools/make_hf_parity_fixture.py [--output tests/fixtures/hf_tiny]
    /work/venv-torch/bin/python tools/make_hf_parity_fixture.py --output tests/fixtures/hf_tiny_erf --hidden_act gelu

Writes config.json + model.safetensors (save_pretrained, safetensors), vocab.txt,
inputs.npz (input_ids, input_mask, segment_ids, masked_lm_positions: padding in the batch
and both segment ids in use) and outputs.npz (sequence_output, pooled_output, mlm_logits at
the masked positions, nsp_logits), all float32 from the model in eval mode.
"""

import argparse
import os

import numpy as np
import torch
import transformers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=os.path.join("tests", "fixtures", "hf_tiny"))
    parser.add_argument(
        "--hidden_act",
        default="gelu_new",
        help="gelu_new: the original BERT's tanh GELU (tests/fixtures/hf_tiny); gelu: transformers' "
        "erf GELU, what released Hugging Face BERT configs say (tests/fixtures/hf_tiny_erf)",
    )
    args = parser.parse_args()
    torch.manual_seed(1234)
    rng = np.random.default_rng(1234)

    config = transformers.BertConfig(
        vocab_size=99,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        hidden_act=args.hidden_act,
        max_position_embeddings=32,
        type_vocab_size=2,
        layer_norm_eps=1e-12,
        attn_implementation="eager",
    )
    model = transformers.BertForPreTraining(config).eval()
    # Default init leaves biases at 0 and LayerNorm at (1, 0), which would hide a transposed
    # or misplaced bias: draw every parameter at random instead.
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "LayerNorm.weight" in name:
                parameter.copy_(1.0 + 0.2 * torch.randn_like(parameter))
            else:
                parameter.copy_(0.1 * torch.randn_like(parameter))

    batch, seq, predictions = 3, 12, 4
    lengths = np.array([12, 9, 6])
    input_mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
    segment_ids = ((np.arange(seq)[None] >= (lengths[:, None] // 2)) * input_mask).astype(np.int32)
    input_ids = (rng.integers(5, config.vocab_size, (batch, seq)) * input_mask).astype(np.int32)
    input_ids[:, 0] = 2  # [CLS]
    masked_lm_positions = np.stack(
        [np.sort(rng.choice(np.arange(1, length), predictions, replace=False)) for length in lengths]
    ).astype(np.int32)
    masked_lm_positions[2, -1] = 0  # a padded prediction slot, as in real batches

    with torch.no_grad():
        out = model.bert(
            input_ids=torch.tensor(input_ids, dtype=torch.long),
            attention_mask=torch.tensor(input_mask, dtype=torch.long),
            token_type_ids=torch.tensor(segment_ids, dtype=torch.long),
        )
        prediction_scores, nsp_logits = model.cls(out.last_hidden_state, out.pooler_output)
    index = torch.tensor(masked_lm_positions, dtype=torch.long)
    mlm_logits = torch.gather(prediction_scores, 1, index[..., None].expand(-1, -1, config.vocab_size))

    os.makedirs(args.output, exist_ok=True)
    model.save_pretrained(args.output, safe_serialization=True)
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [
        f"tok{i}" for i in range(config.vocab_size - 5)
    ]
    with open(os.path.join(args.output, "vocab.txt"), "w", encoding="utf-8") as file:
        file.write("\n".join(tokens) + "\n")
    np.savez(
        os.path.join(args.output, "inputs.npz"),
        input_ids=input_ids,
        input_mask=input_mask,
        segment_ids=segment_ids,
        masked_lm_positions=masked_lm_positions,
    )
    np.savez(
        os.path.join(args.output, "outputs.npz"),
        sequence_output=out.last_hidden_state.numpy(),
        pooled_output=out.pooler_output.numpy(),
        mlm_logits=mlm_logits.numpy(),
        nsp_logits=nsp_logits.numpy(),
    )
    print(
        f"wrote {sorted(os.listdir(args.output))} to {args.output} (transformers {transformers.__version__})"
    )


if __name__ == "__main__":
    main()
