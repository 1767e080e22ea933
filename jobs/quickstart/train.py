"""Quickstart: an MLP classifier trained with DDP (gloo on CPU, NCCL on GPUs) under cvmjob.

Run it anywhere torchrun runs (``torchrun --standalone --nproc_per_node 2 train.py --steps 60``); under cvmjob
the agent adds the data, checkpoint and output folders and the resume point. Rank 0 prints ``step=<N> loss=<X>``
once per step. Each step's batch depends only on the step number, so a run resumed from a checkpoint continues
the exact loss curve of an uninterrupted one.
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
    return parser.parse_args()


def load(data_dir: Path, split: str, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.from_numpy(np.load(data_dir / f"x_{split}.npy")).to(device)
    y = torch.from_numpy(np.load(data_dir / f"y_{split}.npy").astype(np.int64)).to(device)
    return x, y


def batch_indices(step: int, rows: int, batch: int, rank: int, world: int) -> torch.Tensor:
    """This rank's share of the step's global batch: a function of the step alone."""
    generator = torch.Generator().manual_seed(1_000_003 * step + 17)
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
    features, classes = x_train.shape[1], int(y_train.max()) + 1

    torch.manual_seed(0)  # the same initial weights on every rank
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
        idx = batch_indices(step, len(x_train), args.batch_size, rank, world).to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(ddp(x_train[idx]), y_train[idx])
        loss.backward()
        optimizer.step()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)
        loss_value = mean_loss.item() / world
        if rank == 0:
            print(f"step={step} loss={loss_value:.6f}", flush=True)
        trainkit.report(step, loss_value)
        if ckpt.should_save(step):
            ckpt.save(step, {"model": model.state_dict(), "optimizer": optimizer.state_dict()})
        if ckpt.stop_requested:
            if rank == 0:
                print(f"stopping after the requested checkpoint at step {step}", flush=True)
            break
    else:
        if rank == 0:
            write_outputs(model, data_dir, device, args.steps, loss_value)
    trainkit.finish()


def write_outputs(model: nn.Module, data_dir: Path, device: torch.device, steps: int, loss: float) -> None:
    x_val, y_val = load(data_dir, "val", device)
    with torch.no_grad():
        accuracy = (model(x_val).argmax(dim=1) == y_val).float().mean().item()
    out = Path(os.environ.get("CVMJOB_OUTPUT_DIR", "outputs"))
    out.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), out / "model.pt")
    metrics = {"steps": steps, "final_loss": loss, "val_accuracy": accuracy}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    print(f"val_accuracy={accuracy:.4f} outputs={out}", flush=True)


if __name__ == "__main__":
    main()
