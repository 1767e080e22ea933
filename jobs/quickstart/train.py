"""Quickstart: an MLP classifier trained with DDP (gloo on CPU, NCCL on GPUs) under cvmjob.

Run it anywhere torchrun runs (``torchrun --standalone --nproc_per_node 2 train.py --steps 60``); under cvmjob
the agent adds the data, checkpoint and output folders and the resume point. Rank 0 prints ``step=<N> loss=<X>``
once per step. Each step's batch depends only on the step number (and ``--seed``), so a run resumed from a
checkpoint continues the exact loss curve of an uninterrupted one.

Every ``--eval-every`` steps and at the last one, rank 0 evaluates on the validation split and reports
``val_loss`` and ``val_accuracy`` (trainkit.report): they reach the heartbeat and the attempt's result, where a
sweep reads its objective. The evaluation uses no RNG and no gradients, so it leaves the training's numbers as
they are.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from orchestrator import trainkit

HERE = Path(__file__).resolve().parent


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=2048, help="per rank")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--checkpoint-every", type=int, default=10)
    parser.add_argument("--eval-every", type=int, default=10, help="steps between validation metrics")
    parser.add_argument("--seed", type=int, default=0, help="initial weights and batch order")
    args = parser.parse_args()
    if args.eval_every < 1:
        parser.error("--eval-every must be at least 1")
    return args


def load(data_dir: Path, split: str, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.from_numpy(np.load(data_dir / f"x_{split}.npy")).to(device)
    y = torch.from_numpy(np.load(data_dir / f"y_{split}.npy").astype(np.int64)).to(device)
    return x, y


def batch_indices(step: int, seed: int, rows: int, batch: int, rank: int, world: int) -> torch.Tensor:
    """This rank's share of the step's global batch: a function of the step and the seed alone."""
    # Two primes: no (step, seed) pair of a real run shares another's batch; seed 0 keeps the original curve.
    generator = torch.Generator().manual_seed(1_000_003 * step + 17 + 1_000_000_007 * seed)
    order = torch.randperm(rows, generator=generator)
    start = (rank * batch) % rows
    return order.roll(-start)[:batch]


def main() -> None:
    args = parse_args()
    use_cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if use_cuda else "gloo", timeout=datetime.timedelta(seconds=120))
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)

    data_env = os.environ.get("CVMJOB_DATA_DIR")
    data_dir = Path(data_env) / "quickstart" if data_env else HERE / "dataset"
    x_train, y_train = load(data_dir, "train", device)
    x_val, y_val = load(data_dir, "val", device)
    features, classes = x_train.shape[1], int(y_train.max()) + 1

    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = nn.Sequential(
        nn.Linear(features, args.hidden), nn.ReLU(),
        nn.Linear(args.hidden, args.hidden), nn.ReLU(),
        nn.Linear(args.hidden, classes),
    ).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    ckpt = trainkit.Checkpointer(every=args.checkpoint_every)
    start, state = ckpt.restore({"model": model.state_dict(), "optimizer": optimizer.state_dict()})
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    ddp = DistributedDataParallel(model)
    if rank == 0:
        print(f"world={world} device={device} start_step={start} resume_from={ckpt.resume_from or '-'}", flush=True)

    loss_value = float("nan")
    for step in range(start, args.steps):
        idx = batch_indices(step, args.seed, len(x_train), args.batch_size, rank, world).to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(ddp(x_train[idx]), y_train[idx])
        loss.backward()
        optimizer.step()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        loss_value = mean_loss.item() / world
        if rank == 0 and ((step + 1) % args.eval_every == 0 or step == args.steps - 1):
            val_loss, val_accuracy = evaluate(model, x_val, y_val)
            print(f"step={step} loss={loss_value:.6f} val_loss={val_loss:.6f} val_accuracy={val_accuracy:.4f}",
                  flush=True)
            trainkit.report(step, loss_value, total=args.steps, val_loss=val_loss, val_accuracy=val_accuracy)
        else:
            if rank == 0:
                print(f"step={step} loss={loss_value:.6f}", flush=True)
            trainkit.report(step, loss_value, total=args.steps)
        if ckpt.should_save(step):
            ckpt.save(step, {"model": model.state_dict(), "optimizer": optimizer.state_dict()})
        if ckpt.stop_requested:
            if rank == 0:
                print(f"stopping after the requested checkpoint at step {step}", flush=True)
            break
    else:
        if rank == 0:
            write_outputs(model, x_val, y_val, args.steps, loss_value)
    trainkit.finish()


def evaluate(model: nn.Module, x_val: torch.Tensor, y_val: torch.Tensor) -> tuple[float, float]:
    """(loss, accuracy) on the validation split, of the module DDP wraps: a forward of its own, outside DDP's
    collectives, with no gradients and no RNG, so the training's numbers stay those of a run without it."""
    model.eval()
    try:
        with torch.no_grad():
            logits = model(x_val)
            loss = nn.functional.cross_entropy(logits, y_val).item()
            accuracy = (logits.argmax(dim=1) == y_val).float().mean().item()
    finally:
        model.train()
    return loss, accuracy


def write_outputs(model: nn.Module, x_val: torch.Tensor, y_val: torch.Tensor, steps: int, loss: float) -> None:
    # Evaluated again rather than kept from the last step: a run resumed at its end trains no step at all.
    val_loss, accuracy = evaluate(model, x_val, y_val)
    out = Path(os.environ.get("CVMJOB_OUTPUT_DIR", "outputs"))
    out.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), out / "model.pt")
    metrics = {"steps": steps, "final_loss": loss, "val_loss": val_loss, "val_accuracy": accuracy}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    print(f"val_accuracy={accuracy:.4f} outputs={out}", flush=True)


if __name__ == "__main__":
    main()
