"""transformers' side of the format tests: loads fine-tuned folders with its AutoModelFor...
classes and makes BertFor... models with random heads, in a process without TensorFlow.

Used as `python transformers_side.py REQUEST.json FEATURES.npz OUTPUT.npz`: run by path in
a fresh interpreter, never imported (torch and TensorFlow in one process can crash on
import). REQUEST.json:

  {"load": [{"name": "...", "dir": "...", "auto": "AutoModelForSequenceClassification",
             "features": "choice" (optional, the FEATURES.npz prefix; default "rows")}],
   "make": [{"name": "...", "dir": "...", "class": "BertForTokenClassification",
             "config": {BertConfig fields}, "vocab": "path/vocab.txt", "features": ...}],
   "texts": ["..."]}

A "make" model gets random weights everywhere, biases included, is written with
save_pretrained(safe_serialization=True) and a BertTokenizer's save_pretrained, and its
outputs on `texts` (tokenized by the folder's AutoTokenizer) are written too. Every model
runs in eval mode, float32, on FEATURES.npz's "<prefix>/input_ids", ".../input_mask" and
".../segment_ids"; OUTPUT.npz gets "<name>/<output>" (logits, or start_logits and
end_logits), "<name>/text_logits" and "<name>/text_input_ids" for `texts`.
"""

import json
import sys

import numpy as np
import torch
import transformers


def run(model, input_ids, input_mask, segment_ids) -> dict:
    with torch.no_grad():
        outputs = model(
            input_ids=torch.tensor(input_ids, dtype=torch.long),
            attention_mask=torch.tensor(input_mask, dtype=torch.long),
            token_type_ids=torch.tensor(segment_ids, dtype=torch.long),
        )
    names = ("start_logits", "end_logits") if hasattr(outputs, "start_logits") else ("logits",)
    return {name: getattr(outputs, name).numpy().astype(np.float32) for name in names}


def main(request_file: str, features_file: str, output_file: str) -> None:
    with open(request_file, encoding="utf-8") as file:
        request = json.load(file)
    features = dict(np.load(features_file))
    torch.manual_seed(7)
    out = {}
    jobs = [("load", job) for job in request.get("load", [])] + [
        ("make", job) for job in request.get("make", [])
    ]
    for action, job in jobs:
        if action == "make":
            config = transformers.BertConfig(**job["config"])
            model = getattr(transformers, job["class"])(config).eval()
            with torch.no_grad():
                for parameter in model.parameters():  # biases too: a zero bias would hide a lost one
                    parameter.copy_(torch.randn_like(parameter) * 0.05)
            model.save_pretrained(job["dir"], safe_serialization=True)
            transformers.BertTokenizer(job["vocab"], do_lower_case=True).save_pretrained(job["dir"])
        else:
            model = getattr(transformers, job["auto"]).from_pretrained(job["dir"]).eval()
        prefix = job.get("features", "rows")
        inputs = [features[f"{prefix}/{name}"] for name in ("input_ids", "input_mask", "segment_ids")]
        for name, value in run(model, *inputs).items():
            out[f"{job['name']}/{name}"] = value
        texts = request.get("texts")
        if texts and prefix == "rows":
            tokenizer = transformers.AutoTokenizer.from_pretrained(job["dir"])
            encoded = tokenizer(texts, padding=True, return_tensors="np")
            out[f"{job['name']}/text_input_ids"] = encoded["input_ids"]
            logits = run(model, encoded["input_ids"], encoded["attention_mask"], encoded["token_type_ids"])
            for name, value in logits.items():
                out[f"{job['name']}/text_{name}"] = value
    np.savez(output_file, **out)


if __name__ == "__main__":
    main(*sys.argv[1:])
