"""Launched by tests/test_distributed.py as ``accelerate launch ... distributed_train.py OUT
<scripts/train_trl.py flags>``: runs the script's `main` unchanged, counting the rows each
process scores with OAR, then every process writes ``OUT/rank<i>.json`` with a digest of its
weights after training, so the test can compare the processes."""
import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


def weights_digest(model) -> str:
    """SHA-256 over every parameter (name, shape, values), in name order."""
    digest = hashlib.sha256()
    for name, param in sorted(model.named_parameters()):
        digest.update(name.encode())
        digest.update(str(tuple(param.shape)).encode())
        digest.update(param.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()


def main():
    out, argv = Path(sys.argv[1]), sys.argv[2:]
    spec = importlib.util.spec_from_file_location("train_trl", ROOT / "scripts" / "train_trl.py")
    train_trl = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train_trl)

    from oar_lite.course import toy
    from oar_lite.trl import OARGRPOTrainer

    scored = []
    original = OARGRPOTrainer._oar_weights

    def counting(self, output):
        weights, reasoning, no_answer = original(self, output)
        scored.append(int(weights.shape[0]))
        return weights, reasoning, no_answer

    OARGRPOTrainer._oar_weights = counting
    initial = weights_digest(toy.load_model()[0])
    trainer = train_trl.main(argv)
    model = trainer.accelerator.unwrap_model(trainer.model)
    state = trainer.accelerator.state
    record = {
        "rank": state.process_index,
        "world_size": state.num_processes,
        "backend": torch.distributed.get_backend() if torch.distributed.is_initialized() else None,
        "distributed_type": str(state.distributed_type),
        "initial_digest": initial,
        "digest": weights_digest(model),
        "rows_scored": scored,
        "log_history": trainer.state.log_history,
    }
    (out / f"rank{state.process_index}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main()
