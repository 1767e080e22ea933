"""`cvmjob sweep report`: the HTML page opens offline and its plots render in a real browser; the PNG is drawn."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html import escape
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState as OptunaState
from optuna.trial import create_trial
from PIL import Image

from orchestrator.sweep.models import Best, Preemption, SweepView, TrialState, TrialView
from orchestrator.sweep.report import write_report

# A parameter's value is whatever the sweep's search space says: the page must show it, never run it.
INJECTED = "<script>alert('param')</script>"
STUDY = "lr-sweep <b>&"
DISTRIBUTIONS = {
    "lr": FloatDistribution(1e-4, 1e-1, log=True),
    "optimizer": CategoricalDistribution(["adam", "sgd", INJECTED]),
}
# number: state, lr, optimizer, value (a pruned trial's is its last intermediate), intermediate values
TRIALS = [
    (OptunaState.COMPLETE, 1e-3, "adam", 0.90, {0: 1.5, 1: 1.1, 2: 0.9}),
    (OptunaState.COMPLETE, 1e-2, "sgd", 0.70, {0: 1.2, 1: 0.7}),
    (OptunaState.PRUNED, 5e-2, INJECTED, 1.90, {0: 2.0, 1: 1.9}),
    (OptunaState.COMPLETE, 3e-3, "adam", 0.50, {0: 1.0, 1: 0.5}),
    (OptunaState.FAIL, 8e-2, "sgd", None, {}),
    (OptunaState.COMPLETE, 2e-3, INJECTED, 0.45, {0: 0.8, 1: 0.45}),
    (OptunaState.PRUNED, 1e-4, "adam", 2.50, {0: 2.5}),
    (OptunaState.COMPLETE, 4e-3, "sgd", 0.60, {0: 0.9, 1: 0.6}),
]
T0 = 1_700_000_000.0
SECTIONS = ["summary", "history", "parallel", "importances", "intermediate", "cost", "timeline", "lost", "trials"]
PLOTS = ["history", "parallel", "importances", "intermediate", "cost", "timeline", "lost"]  # all drawable here
# A resource the browser would fetch from elsewhere: a script, a stylesheet, an image, a frame, a CSS import.
EXTERNAL = re.compile(
    r"<(?:script|link|img|iframe|source|embed|object)\b[^>]*\b(?:src|href|data)\s*=\s*[\"']?\s*(?:https?:)?//"
    r"|@import\s+(?:url\()?[\"']?\s*(?:https?:)?//",
    re.IGNORECASE,
)


def _sweep() -> tuple[optuna.Study, SweepView]:
    study = optuna.create_study(storage=None, study_name=STUDY)
    views = []
    for number, (state, lr, optimizer, value, intermediate) in enumerate(TRIALS):
        params = {"lr": lr, "optimizer": optimizer}
        study.add_trial(
            create_trial(
                state=state, params=params, distributions=DISTRIBUTIONS, value=value, intermediate_values=intermediate
            )
        )
        started = T0 + 600 * number
        views.append(
            TrialView(
                number=number,
                state=TrialState(state.name),
                value=value,
                params=params,
                cost=1.5 + 0.25 * number,
                attempts=2 if number == 3 else 1,
                retries=1 if number == 4 else 0,
                job_id=f"job-{number}",
                started_at=started,
                ended_at=started + 1500,
                preemptions=[Preemption(at=started + 700, gpu_minutes_lost=12.5)] if number == 3 else [],
                intermediate=intermediate,
                reason={
                    OptunaState.PRUNED: "pruned at step 1",
                    OptunaState.FAIL: "exit 1: <img src=x onerror=alert(1)>",
                }.get(state, ""),
            )
        )
    view = SweepView(
        study=STUDY,
        directions=["minimize"],
        metrics=["val_loss"],
        state="stopped",
        stopped_reason="max_cost <reached>",
        trials=views,
        best=Best(number=5, value=0.45, params=views[5].params),
        cost=sum(t.cost for t in views),
        max_cost=50.0,
    )
    return study, view


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    study, view = _sweep()
    out = tmp_path_factory.mktemp("report") / "sweep.html"
    assert write_report(study, view, out) == (out, out.with_suffix(".png"))
    return out, out.with_suffix(".png")


def test_the_page_is_one_offline_file_with_every_section_and_escapes_what_the_user_wrote(
    report: tuple[Path, Path],
) -> None:
    from plotly.offline import get_plotlyjs

    page = report[0].read_text(encoding="utf-8")
    assert EXTERNAL.findall(page) == []
    assert page.count(get_plotlyjs()) == 1  # inlined, once for every plot
    for section in SECTIONS:
        assert f'<section id="{section}">' in page
    for plot in PLOTS:
        assert f'id="plot-{plot}"' in page
    assert page.count('class="plotly-graph-div"') == len(PLOTS)
    assert "Skipped" not in page

    # The header: the study, why it stopped, trials by state, cost against the limit, the best trial.
    assert f"<dd>{escape(STUDY)}</dd>" in page
    assert escape("stopped (max_cost <reached>)") in page
    assert "8: 5 COMPLETE, 2 PRUNED, 1 FAIL" in page
    assert "19.00 CNY of max_cost 50.00 CNY (38%)" in page
    assert "12.5 GPU-minutes, 1 spot reclaim(s)" in page
    assert escape(f"#5: val_loss = 0.45; lr=0.002, optimizer={INJECTED}") in page

    # What the user wrote is text: in the table escaped, in plotly's JSON as \u003c escapes.
    assert INJECTED not in page
    assert "<img src=x" not in page
    assert escape(INJECTED) in page
    assert escape("exit 1: <img src=x onerror=alert(1)>") in page
    assert "<b>&" not in page
    for number in range(len(TRIALS)):
        assert f"<td>job-{number}</td>" in page


def test_the_png_summary_is_drawn(report: tuple[Path, Path]) -> None:
    with Image.open(report[1]) as image:
        assert image.format == "PNG"
        assert image.size == (1100, 700)
        assert _colours(image) > 50


def test_the_plots_render_in_a_headless_browser_with_no_network(report: tuple[Path, Path], tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: `make install` installs it (as root, on Debian)")
        pytest.skip("chromium is not installed (apt-get install chromium); CI runs this")
    screenshot = tmp_path / "page.png"
    browser = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            # Every host name fails to resolve: the page renders from the file alone, as it would offline.
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--window-size=1400,3000",
            # Virtual time runs plotly's asynchronous drawing to the end before the DOM is dumped.
            "--virtual-time-budget=15000",
            f"--screenshot={screenshot}",
            "--dump-dom",
            report[0].as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert browser.returncode == 0, browser.stderr[-4000:]
    # plotly.js is in the DOM too (it names its own classes and errors): only what it drew counts.
    dom = re.sub(r"<script\b.*?</script>", "", browser.stdout, flags=re.DOTALL | re.IGNORECASE)
    assert dom.count('class="main-svg"') >= len(PLOTS)
    for plot in PLOTS:
        drawn = re.search(rf'id="plot-{plot}".*?</section>', dom, re.DOTALL)
        assert drawn is not None, plot
        assert 'class="main-svg"' in drawn.group(), f"{plot} was not drawn"
    assert "WebGL is not supported" not in dom  # the parallel coordinates draw their lines with WebGL
    with Image.open(screenshot) as image:
        assert image.size == (1400, 3000)
        assert _colours(image) > 200  # text, axes and coloured traces, not a blank page


def test_a_plot_optuna_cannot_draw_is_skipped_with_its_reason(tmp_path: Path) -> None:
    study = optuna.create_study(storage=None, study_name="young")
    distribution = {"lr": DISTRIBUTIONS["lr"]}
    study.add_trial(create_trial(state=OptunaState.COMPLETE, params={"lr": 1e-3}, distributions=distribution, value=1))
    study.add_trial(create_trial(state=OptunaState.RUNNING, params={"lr": 1e-2}, distributions=distribution))
    view = SweepView(
        study="young",
        directions=["minimize"],
        metrics=["val_loss"],
        state="running",
        trials=[
            TrialView(number=0, state=TrialState.COMPLETE, value=1.0, params={"lr": 1e-3}, cost=1.0),
            TrialView(number=1, state=TrialState.RUNNING, params={"lr": 1e-2}, started_at=T0),
        ],
        best=Best(number=0, value=1.0, params={"lr": 1e-3}),
        cost=1.0,
    )
    html, png = write_report(study, view, tmp_path / "young.html")
    page = html.read_text(encoding="utf-8")
    assert "Skipped: needs at least 2 completed trials, the study has 1." in page
    assert "Skipped: no trial reported intermediate values." in page
    assert "No spot reclaim: no GPU time lost." in page
    assert "1.00 CNY (no max_cost)" in page
    for plot in ["history", "parallel", "cost", "timeline"]:
        assert f'id="plot-{plot}"' in page
    for plot in ["importances", "intermediate", "lost"]:
        assert f'id="plot-{plot}"' not in page
    assert png.stat().st_size > 0


def test_what_optuna_warns_while_drawing_is_shown_under_its_plot(tmp_path: Path) -> None:
    study = optuna.create_study(storage=None, study_name="conditional")
    views = []
    for number, (lr, optimizer, value) in enumerate([(1e-3, "adam", 1.0), (1e-2, "sgd", 2.0), (3e-3, "sgd", 1.5)]):
        params: dict[str, Any] = {"lr": lr, "optimizer": optimizer}
        distributions = dict(DISTRIBUTIONS)
        if number == 0:  # a conditional parameter, in one trial only: too few for its importance to be accurate
            params["momentum"] = 0.9
            distributions["momentum"] = FloatDistribution(0, 1)
        study.add_trial(create_trial(params=params, distributions=distributions, value=value))
        views.append(TrialView(number=number, state=TrialState.COMPLETE, value=value, params=params))
    view = SweepView(study="conditional", directions=["minimize"], metrics=["loss"], state="running", trials=views)
    page = write_report(study, view, tmp_path / "conditional.html")[0].read_text(encoding="utf-8")
    importances = re.search(r'<section id="importances">.*?</section>', page, re.DOTALL)
    assert importances is not None
    assert 'id="plot-importances"' in importances.group()
    assert (
        '<p class="caveat">Optuna: Some regimes for parameter `momentum` have less than 2 trials.'
        in importances.group()
    )


def test_several_objectives_are_plotted_for_the_first_one_by_its_name(tmp_path: Path) -> None:
    study = optuna.create_study(storage=None, study_name="pareto", directions=["maximize", "minimize"])
    trials = []
    for number, (lr, optimizer, values) in enumerate(
        [(1e-3, "adam", [0.8, 3.0]), (1e-2, "sgd", [0.9, 5.0]), (3e-3, "adam", [0.7, 2.0]), (2e-3, "sgd", [0.85, 4.0])]
    ):
        params = {"lr": lr, "optimizer": optimizer}
        study.add_trial(create_trial(params=params, distributions=DISTRIBUTIONS, values=values))
        trials.append(TrialView(number=number, state=TrialState.COMPLETE, values=values, params=params, cost=2.0))
    view = SweepView(
        study="pareto",
        directions=["maximize", "minimize"],
        metrics=["accuracy", "latency_ms"],
        state="finished",
        trials=trials,
        best=Best(number=1, values=[0.9, 5.0], params=trials[1].params),
        cost=8.0,
    )
    page = write_report(study, view, tmp_path / "pareto.html")[0].read_text(encoding="utf-8")
    for plot in ["history", "parallel", "importances"]:
        assert f'id="plot-{plot}"' in page
    assert "Skipped: no trial reported intermediate values (Optuna records them for single-objective" in page
    assert "the first objective, accuracy" in page
    assert "#1 (the first of the Pareto front): accuracy = 0.9, latency_ms = 5" in page
    assert '"name":"accuracy"' in page  # Optuna's traces are named after the first objective's metric


def test_the_png_cannot_take_the_html_s_place(tmp_path: Path) -> None:
    study, view = _sweep()
    with pytest.raises(ValueError, match="PNG summary goes next to it"):
        write_report(study, view, tmp_path / "sweep.png")


def _colours(image: Image.Image) -> int:
    colours = image.convert("RGB").getcolors(maxcolors=1 << 24)
    assert colours is not None
    return len(colours)
