"""`cvmjob sweep report`: one self-contained HTML page and a PNG summary of a sweep.

The page holds Optuna's own plots of the study, and what only cvmjob knows about its trials: what each cost, when
spot reclaims hit them, and the GPU time those reclaims threw away. It opens offline (plotly.js is inlined once, so
a report archived by CI still renders years later). The PNG is the one-image version for terminals and CI logs.

Optuna, plotly and matplotlib take seconds to import together: they are imported by the functions that draw, so
importing this module costs the CLI's startup nothing.
"""

from __future__ import annotations

import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from orchestrator.extras import need
from orchestrator.sweep.models import SweepView, TrialState, TrialView

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

# One colour per state, the same in every plot of the page and in the PNG.
STATE_COLOURS: dict[TrialState, str] = {
    TrialState.COMPLETE: "#2ca02c",
    TrialState.PRUNED: "#ff7f0e",
    TrialState.FAIL: "#d62728",
    TrialState.RUNNING: "#1f77b4",
    TrialState.WAITING: "#7f7f7f",
}
# The modebar's plotly logo links to plotly.com: nothing on the page points outside it.
_PLOTLY_CONFIG = {"displaylogo": False}
_PLOT_HEIGHT = 480


@dataclass
class _Section:
    """One part of the page: a plot, or the reason there is none."""

    id: str
    title: str
    note: str = ""
    figure: Any = None  # a plotly Figure (plotly ships no types)
    absent: str = ""
    caveats: list[str] = field(default_factory=list)  # what Optuna warned while drawing


def write_report(study: optuna.Study, view: SweepView, out: Path) -> tuple[Path, Path]:
    """Write the HTML report to ``out`` and its PNG summary next to it (same stem, ``.png``); return both paths."""
    need("report", "plotly", "matplotlib")
    png = out.with_suffix(".png")
    if png == out:
        raise ValueError(f"{out}: the report is the HTML file; its PNG summary goes next to it")
    out.parent.mkdir(parents=True, exist_ok=True)
    sections = [*_optuna_sections(study, view), *_cvmjob_sections(view)]
    out.write_text(_page(view, sections), encoding="utf-8")
    _write_summary_png(view, png)
    return out, png


# --- Optuna's plots ---------------------------------------------------------------------------------------------


def _optuna_sections(study: optuna.Study, view: SweepView) -> list[_Section]:
    from optuna import visualization
    from optuna.study import StudyDirection
    from optuna.trial import TrialState as OptunaState

    metric = view.metrics[0] if view.metrics else "objective"
    several = len(study.directions) > 1
    # With several objectives Optuna's plots need one target: the first objective, named after its metric.
    target: Callable[[FrozenTrial], float] | None = _first_objective if several else None
    # PED-ANOVA, Optuna's importance evaluator, ranks low targets best: a maximised first objective is negated.
    importance_target = target
    if several and study.directions[0] == StudyDirection.MAXIMIZE:
        importance_target = _negated_first_objective
    objectives = f" (the first objective, {metric})" if several else ""

    trials = study.get_trials(deepcopy=False)
    completed = [t for t in trials if t.state == OptunaState.COMPLETE]
    params = sorted({name for t in completed for name in t.params})
    reported = [t for t in trials if t.intermediate_values]
    none_completed = "no trial has completed yet"

    history = _Section(
        "history", "Optimization history", f"Each completed trial's {metric}{objectives}, and the best so far."
    )
    _draw(
        history,
        none_completed if not completed else "",
        lambda: visualization.plot_optimization_history(study, target=target, target_name=metric),
    )

    parallel = _Section("parallel", "Parallel coordinates", f"Completed trials' parameters against their {metric}.")
    why = none_completed if not completed else "the trials have no parameters" if not params else ""
    _draw(parallel, why, lambda: visualization.plot_parallel_coordinate(study, target=target, target_name=metric))

    importances = _Section(
        "importances", "Parameter importances", f"How much each parameter decided {metric}{objectives}."
    )
    why = ""
    if len(completed) < 2:
        why = f"needs at least 2 completed trials, the study has {len(completed)}"
    elif len(params) < 2:
        why = f"needs at least 2 parameters to compare, the completed trials have {len(params)}"
    _draw(
        importances,
        why,
        lambda: visualization.plot_param_importances(study, target=importance_target, target_name=metric),
    )

    intermediate = _Section("intermediate", "Intermediate values", f"The {metric} each trial reported while training.")
    why = ""
    if not reported:
        why = "no trial reported intermediate values"
        if several:
            why += " (Optuna records them for single-objective studies only)"
    _draw(intermediate, why, lambda: visualization.plot_intermediate_values(study))
    return [history, parallel, importances, intermediate]


def _first_objective(trial: FrozenTrial) -> float:
    # Optuna calls a target on completed trials only, and those have every objective's value.
    return cast("list[float]", trial.values)[0]


def _negated_first_objective(trial: FrozenTrial) -> float:
    return -_first_objective(trial)


def _draw(section: _Section, why_not: str, plot: Callable[[], Any]) -> None:
    """Draw an Optuna plot into ``section``, or say why not: a plot Optuna cannot draw costs the page nothing."""
    if why_not:
        section.absent = f"Skipped: {why_not}."
        return
    # Optuna's warnings (too few trials for accurate importances, ...) are about the plot: the page shows them.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # The negated target above already makes low values the best ones.
        warnings.filterwarnings("ignore", message=r".*computes the importances of params to achieve low")
        try:
            figure = plot()
        # Optuna raises what the data makes it (ValueError, RuntimeError, ...); one plot must not cost the report.
        except Exception as exc:
            section.absent = f"Skipped: Optuna could not draw it ({type(exc).__name__}: {exc})."
            return
    section.figure = figure
    section.caveats = list(dict.fromkeys(str(w.message) for w in caught))


# --- What only cvmjob knows: cost, reclaims --------------------------------------------------------------------


def _cvmjob_sections(view: SweepView) -> list[_Section]:
    import plotly.graph_objects as go

    trials = sorted(view.trials, key=lambda t: t.number)
    cost = _Section("cost", "Cost per trial", f"What each trial's job was billed (CNY); {view.cost:.2f} CNY in all.")
    if trials:
        cost.figure = go.Figure(
            [
                go.Bar(
                    name=state.value,
                    x=[t.number for t in group],
                    y=[t.cost for t in group],
                    marker_color=STATE_COLOURS[state],
                    hovertemplate="trial %{x}: %{y:.2f} CNY<extra>" + state.value + "</extra>",
                )
                for state, group in _by_state(trials)
            ],
            layout={
                "barmode": "overlay",
                "xaxis": _trial_axis(trials),
                "yaxis": {"title": {"text": "cost (CNY)"}},
                "legend": {"title": {"text": "state"}},
            },
        )
    else:
        cost.absent = "No trials yet."
    return [cost, _timeline(trials), _lost(trials)]


def _timeline(trials: Sequence[TrialView]) -> _Section:
    import plotly.graph_objects as go

    section = _Section(
        "timeline",
        "Preemption timeline",
        "Each trial from its start to its end (UTC), a cross at each spot reclaim of its job.",
    )
    started = [t for t in trials if t.started_at is not None]
    if not started:
        section.absent = "No trial has started yet."
        return section
    now = time.time()  # where a running trial's line ends
    data: list[Any] = []
    for state, group in _by_state(started):
        xs: list[str | None] = []
        ys: list[str | None] = []
        for t in group:
            assert t.started_at is not None  # `started` holds only those
            # A gap (None) between trials keeps one trace per state, so the legend is the states.
            xs += [_utc(t.started_at), _utc(t.ended_at if t.ended_at is not None else now), None]
            ys += [_row(t), _row(t), None]
        data.append(
            go.Scatter(
                name=state.value,
                x=xs,
                y=ys,
                mode="lines",
                line={"color": STATE_COLOURS[state], "width": 10},
                hoverinfo="skip",
            )
        )
    reclaims = [(t, p) for t in started for p in t.preemptions]
    if reclaims:
        data.append(
            go.Scatter(
                name="spot reclaim",
                x=[_utc(p.at) for _, p in reclaims],
                y=[_row(t) for t, _ in reclaims],
                mode="markers",
                marker={"symbol": "x", "size": 14, "color": "black"},
                text=[f"{p.gpu_minutes_lost:.1f} GPU-minutes lost" for _, p in reclaims],
                hovertemplate="%{y}, %{x}: %{text}<extra>reclaim</extra>",
            )
        )
    section.figure = go.Figure(
        data,
        layout={
            "height": max(_PLOT_HEIGHT, 120 + 28 * len(started)),
            "xaxis": {"title": {"text": "time (UTC)"}, "type": "date"},
            # Trial 0 on top, in number order whatever order the traces list them in.
            "yaxis": {
                "type": "category",
                "categoryorder": "array",
                "categoryarray": [_row(t) for t in started],
                "autorange": "reversed",
            },
        },
    )
    return section


def _lost(trials: Sequence[TrialView]) -> _Section:
    import plotly.graph_objects as go

    total = sum(_lost_minutes(t) for t in trials)
    reclaims = sum(len(t.preemptions) for t in trials)
    section = _Section(
        "lost",
        "GPU time lost to reclaims",
        f"{total:.1f} GPU-minutes lost in all, to {reclaims} spot reclaim(s): trained since the last checkpoint, and "
        "the relaunch until training again.",
    )
    hit = [t for t in trials if t.preemptions]
    if not hit:
        section.absent = "No spot reclaim: no GPU time lost."
        return section
    section.figure = go.Figure(
        go.Bar(
            x=[t.number for t in hit],
            y=[_lost_minutes(t) for t in hit],
            text=[f"{len(t.preemptions)} reclaim(s)" for t in hit],
            marker_color=[STATE_COLOURS[t.state] for t in hit],
            hovertemplate="trial %{x}: %{y:.1f} GPU-minutes, %{text}<extra></extra>",
        ),
        layout={
            "xaxis": _trial_axis(hit),
            "yaxis": {"title": {"text": "GPU-minutes lost"}},
        },
    )
    return section


def _by_state(trials: Sequence[TrialView]) -> list[tuple[TrialState, list[TrialView]]]:
    return [(s, group) for s in TrialState if (group := [t for t in trials if t.state == s])]


def _trial_axis(trials: Sequence[TrialView]) -> dict[str, Any]:
    # Trial numbers as categories (no fractional ticks), in number order rather than the traces' (one per state).
    return {
        "title": {"text": "trial"},
        "type": "category",
        "categoryorder": "array",
        "categoryarray": [t.number for t in trials],
    }


def _row(trial: TrialView) -> str:
    return f"trial {trial.number}"


def _lost_minutes(trial: TrialView) -> float:
    return sum(p.gpu_minutes_lost for p in trial.preemptions)


def _utc(ts: float) -> str:
    # Plotly reads zone-less date strings as they are: UTC, whatever the reader's browser zone.
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


# --- The page ---------------------------------------------------------------------------------------------------

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1300px; color: #222; }
h1 { margin-bottom: 0.2em; }
dl.summary { display: grid; grid-template-columns: max-content 1fr; gap: 0.3em 1.5em; }
dl.summary dt { font-weight: 600; }
dl.summary dd { margin: 0; }
section { margin-top: 2.5em; }
p.note { color: #555; }
p.absent { padding: 1em; background: #f4f4f4; border-left: 4px solid #999; }
p.caveat { color: #8a5300; font-size: 0.9em; }
table { border-collapse: collapse; font-size: 0.9em; width: 100%; }
th, td { border: 1px solid #ddd; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
"""


def _page(view: SweepView, sections: Sequence[_Section]) -> str:
    from plotly.offline import get_plotlyjs

    title = escape(f"Sweep {view.study}")
    body = "\n".join([f"<h1>{title}</h1>", _summary(view), *map(_render, sections), _table(view)])
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{title}</title>\n<style>{_STYLE}</style>\n"
        f'<script type="text/javascript">{get_plotlyjs()}</script>\n'
        f"</head>\n<body>\n{body}\n</body>\n</html>\n"
    )


def _summary(view: SweepView) -> str:
    counts = Counter(t.state for t in view.trials)
    by_state = ", ".join(f"{counts[s]} {s.value}" for s in TrialState if counts[s])
    cost = f"{view.cost:.2f} CNY"
    if view.max_cost:
        cost += f" of max_cost {view.max_cost:.2f} CNY ({100 * view.cost / view.max_cost:.0f}%)"
    else:
        cost += " (no max_cost)"
    lost = sum(_lost_minutes(t) for t in view.trials)
    reclaims = sum(len(t.preemptions) for t in view.trials)
    state = view.state + (f" ({view.stopped_reason})" if view.stopped_reason else "")
    objectives = ", ".join(f"{m} ({d})" for m, d in zip(view.metrics, view.directions, strict=False))
    rows = [
        ("Study", view.study),
        ("State", state),
        ("Objectives", objectives),
        ("Trials", f"{len(view.trials)}" + (f": {by_state}" if by_state else "")),
        ("Cost", cost),
        ("Lost to reclaims", f"{lost:.1f} GPU-minutes, {reclaims} spot reclaim(s)"),
        ("Best trial", _best(view)),
        ("Written", datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")),
    ]
    items = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in rows)
    return f'<section id="summary"><dl class="summary">{items}</dl></section>'


def _best(view: SweepView) -> str:
    best = view.best
    if best is None:
        return "none yet"
    values = best.values if best.values is not None else [best.value] if best.value is not None else []
    scores = ", ".join(f"{m} = {_number(v)}" for m, v in zip(view.metrics, values, strict=False)) or "no value"
    front = " (the first of the Pareto front)" if len(view.directions) > 1 else ""
    return f"#{best.number}{front}: {scores}; {_params(best.params)}"


def _render(section: _Section) -> str:
    parts = [f'<section id="{section.id}">', f"<h2>{escape(section.title)}</h2>"]
    if section.note:
        parts.append(f'<p class="note">{escape(section.note)}</p>')
    if section.figure is None:
        parts.append(f'<p class="absent">{escape(section.absent)}</p>')
    else:
        height = section.figure.layout.height or _PLOT_HEIGHT
        parts.append(
            section.figure.to_html(
                full_html=False,
                include_plotlyjs=False,
                div_id=f"plot-{section.id}",
                config=_PLOTLY_CONFIG,
                default_height=f"{height}px",
            )
        )
    parts += [f'<p class="caveat">Optuna: {escape(c)}</p>' for c in section.caveats]
    parts.append("</section>")
    return "\n".join(parts)


def _table(view: SweepView) -> str:
    head = ["#", "state", "value", "params", "cost (CNY)", "attempts", "retries", "job", "reason"]
    rows = []
    for t in sorted(view.trials, key=lambda t: t.number):
        values = ", ".join(map(_number, t.values)) if t.values is not None else _number(t.value)
        cells = [
            (str(t.number), "num"),
            (t.state.value, ""),
            (values, "num"),
            (_params(t.params), ""),
            (f"{t.cost:.2f}", "num"),
            (str(t.attempts), "num"),
            (str(t.retries), "num"),
            (t.job_id or "", ""),
            (t.reason, ""),
        ]
        tds = "".join(
            f'<td class="{cls}">{escape(text)}</td>' if cls else f"<td>{escape(text)}</td>" for text, cls in cells
        )
        rows.append(f'<tr style="border-left: 4px solid {STATE_COLOURS[t.state]}">{tds}</tr>')
    ths = "".join(f"<th>{escape(h)}</th>" for h in head)
    return (
        f'<section id="trials"><h2>Trials</h2>\n<table>\n<thead><tr>{ths}</tr></thead>\n'
        f"<tbody>\n{chr(10).join(rows)}\n</tbody>\n</table></section>"
    )


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_number(v) if isinstance(v, float) else v}" for k, v in params.items()) or "no params"


# --- The PNG ----------------------------------------------------------------------------------------------------


def _write_summary_png(view: SweepView, png: Path) -> None:
    # The Agg canvas, not pyplot: no global backend to switch, nothing left open between reports.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    trials = sorted(view.trials, key=lambda t: t.number)
    metric = view.metrics[0] if view.metrics else "objective"
    maximize = bool(view.directions) and view.directions[0] == "maximize"

    figure = Figure(figsize=(11, 7), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    history, cost = figure.subplots(2, 1, sharex=True, height_ratios=[2, 1])

    best_x: list[int] = []
    best_y: list[float] = []
    for t in trials:
        value = _first_value(t)
        if t.state != TrialState.COMPLETE or value is None:
            continue
        better = not best_y or (value > best_y[-1] if maximize else value < best_y[-1])
        best_x.append(t.number)
        best_y.append(value if better else best_y[-1])
    if best_x:
        history.step(best_x, best_y, where="post", color="black", label="best so far")
    for state, marker in ((TrialState.COMPLETE, "o"), (TrialState.PRUNED, "v")):
        points = [(t.number, v) for t in trials if t.state == state and (v := _first_value(t)) is not None]
        if points:
            history.scatter(
                *zip(*points, strict=True),
                marker=marker,
                color=STATE_COLOURS[state],
                label=state.value.lower(),
                zorder=3,
            )
    failed = [t.number for t in trials if t.state == TrialState.FAIL]
    if failed:
        # A failed trial has no value: its cross sits on the axis, at its number.
        history.scatter(
            failed,
            [0.0] * len(failed),
            marker="x",
            color=STATE_COLOURS[TrialState.FAIL],
            label="failed",
            transform=history.get_xaxis_transform(),
            clip_on=False,
            zorder=3,
        )
    if not best_x:
        history.text(0.5, 0.5, "no trial has completed yet", transform=history.transAxes, ha="center", color="#777")
    history.set_ylabel(f"{metric} ({view.directions[0] if view.directions else 'minimize'})")
    history.grid(alpha=0.3)
    if history.get_legend_handles_labels()[0]:
        history.legend(loc="best")

    cost.bar([t.number for t in trials], [t.cost for t in trials], color=[STATE_COLOURS[t.state] for t in trials])
    cost.set_xlabel("trial")
    cost.set_ylabel("cost (CNY)")
    cost.grid(alpha=0.3, axis="y")

    best = "no best yet"
    if view.best is not None:
        value = view.best.values[0] if view.best.values else view.best.value
        best = f"best {metric} {_number(value)} (trial {view.best.number})"
    total = f"{view.cost:.2f} CNY" + (f" of {view.max_cost:.2f}" if view.max_cost else "")
    figure.suptitle(f"{view.study}: {best}, cost {total}")
    figure.savefig(png)


def _first_value(trial: TrialView) -> float | None:
    """The first objective's value; a pruned trial without one stands at its last reported value."""
    if trial.value is not None:
        return trial.value
    if trial.values:
        return trial.values[0]
    if trial.intermediate:
        return trial.intermediate[max(trial.intermediate)]
    return None
