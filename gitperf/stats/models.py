"""Performance models of a function's sampled calls: duration y as a function of x (the call's
ordinal in the run, or any other size measure).  The thesis' postprocessors: regression analysis,
regressogram, moving average and kernel regression, each with its coefficient of determination R².

Pure numpy; every model can be evaluated (`predict`) and integrated over an interval, which is what
the integral-comparison check uses.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

REGRESSION_CLASSES = ("constant", "linear", "logarithmic", "quadratic", "power", "exponential")


@dataclass(frozen=True)
class Model:
    kind: str  # regression:<class> | regressogram | moving-average:<sma|smm|ema> | kernel:<gaussian|box>
    r2: float
    params: dict[str, float] = field(default_factory=dict)
    # Piecewise / non-parametric models keep their fitted curve on a grid.
    grid_x: tuple[float, ...] = ()
    grid_y: tuple[float, ...] = ()

    def predict(self, x) -> np.ndarray:
        x = np.asarray(x, float)
        if self.grid_x:
            return np.interp(x, self.grid_x, self.grid_y)
        cls = self.kind.split(":", 1)[1]
        return _regression_eval(cls, self.params["a"], self.params["b"], self.params.get("c", 0.0), x)

    def integral(self, lo: float, hi: float, points: int = 256) -> float:
        xs = np.linspace(lo, hi, points)
        return float(np.trapezoid(self.predict(xs), xs))

    @property
    def reliable(self) -> bool:
        """The thesis treats a model with R² >= 0.5 as describing the data."""
        return self.r2 >= 0.5


def r_squared(y: np.ndarray, fitted: np.ndarray) -> float:
    ss_tot = float(((y - y.mean()) ** 2).sum())
    ss_res = float(((y - fitted) ** 2).sum())
    if ss_tot == 0:
        return 1.0 if ss_res == 0 else 0.0
    return 1.0 - ss_res / ss_tot


def _regression_eval(cls: str, a: float, b: float, c: float, x: np.ndarray) -> np.ndarray:
    if cls == "constant":
        return np.full_like(x, a)
    if cls == "linear":
        return a + b * x
    if cls == "logarithmic":
        return a + b * np.log(np.maximum(x, 1e-12))
    if cls == "quadratic":
        return a + b * x + c * x * x
    if cls == "power":
        return a * np.power(np.maximum(x, 1e-12), b)
    if cls == "exponential":
        return a * np.exp(np.clip(b * x, -700, 700))
    raise ValueError(f"unknown regression class {cls}")


def _poly(x: np.ndarray, y: np.ndarray, degree: int) -> list[float]:
    """Least-squares polynomial coefficients, lowest power first.  Fitted on a scaled domain (call
    ordinals reach millions, and x^2 would make the plain normal equations ill-conditioned)."""
    if len(np.unique(x)) <= degree:
        return [float(y.mean())] + [0.0] * degree
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.RankWarning)  # near-collinear data: still least squares
        coef = np.polynomial.Polynomial.fit(x, y, degree).convert().coef
    return [float(v) for v in coef] + [0.0] * (degree + 1 - len(coef))


def fit_regression(x: Sequence[float], y: Sequence[float], cls: str) -> Model:
    """Least squares of one class.  Power and exponential are fitted on log(y) (they need y > 0)."""
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    c = 0.0
    if cls == "constant":
        a, b = float(y.mean()), 0.0
    elif cls in ("linear", "logarithmic"):
        u = x if cls == "linear" else np.log(np.maximum(x, 1e-12))
        a, b = _poly(u, y, 1)
    elif cls == "quadratic":
        a, b, c = _poly(x, y, 2)
    elif cls in ("power", "exponential"):
        ly = np.log(np.maximum(y, 1e-12))
        u = np.log(np.maximum(x, 1e-12)) if cls == "power" else x
        la, b = _poly(u, ly, 1)
        a = math.exp(la)
    else:
        raise ValueError(f"unknown regression class {cls}")
    r2 = r_squared(y, _regression_eval(cls, a, b, c, x))
    return Model(f"regression:{cls}", r2, {"a": a, "b": b, "c": c})


def best_regression(x: Sequence[float], y: Sequence[float]) -> Model:
    """The class with the lowest BIC (n ln(RSS/n) + k ln n), so an extra parameter must pay for
    itself: adjusted R² lets a logarithmic curve fitted to noise beat the constant it really is.
    On ties the simpler class (earlier in REGRESSION_CLASSES) wins."""
    n = len(x)
    y_arr = np.asarray(y, float)
    ss_tot = float(((y_arr - y_arr.mean()) ** 2).sum()) or 1e-300
    n_params = {"constant": 1, "linear": 2, "logarithmic": 2, "quadratic": 3, "power": 2, "exponential": 2}
    best, best_score = None, math.inf
    for cls in REGRESSION_CLASSES:
        if cls in ("logarithmic", "power") and min(x) <= 0:
            continue
        if cls in ("power", "exponential") and min(y) <= 0:
            continue
        m = fit_regression(x, y, cls)
        rss = max((1 - m.r2) * ss_tot, 1e-300)
        bic = n * math.log(rss / n) + n_params[cls] * math.log(n)
        if bic < best_score - 1e-9:
            best, best_score = m, bic
    return best


def regressogram(x: Sequence[float], y: Sequence[float], bins: int | None = None) -> Model:
    """Bin means over equal-width bins.  Bin count by the Freedman-Diaconis rule on x (falls back to
    Sturges when the IQR is zero), at most n/2 so every bin has data on average."""
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    n = len(x)
    if bins is None:
        iqr = float(np.subtract(*np.percentile(x, [75, 25])))
        span = float(x.max() - x.min())
        bins = math.ceil(span / (2 * iqr / n ** (1 / 3))) if iqr > 0 and span > 0 else math.ceil(math.log2(n) + 1)
        bins = max(1, min(bins, n // 2 or 1))
    edges = np.linspace(x.min(), x.max(), bins + 1)
    idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, bins - 1)
    means = np.array([y[idx == i].mean() if np.any(idx == i) else np.nan for i in range(bins)])
    # empty bins take their neighbours' value so the step function is defined everywhere
    valid = ~np.isnan(means)
    means = np.interp(np.arange(bins), np.flatnonzero(valid), means[valid])
    fitted = means[idx]
    centers = (edges[:-1] + edges[1:]) / 2
    return Model("regressogram", r_squared(y, fitted), {"bins": float(bins)},
                 tuple(float(v) for v in centers), tuple(float(v) for v in means))


def moving_average(x: Sequence[float], y: Sequence[float], method: str = "sma", window: int | None = None) -> Model:
    """Simple (sma), median (smm) or exponential (ema) moving average over y in x order.
    Window by rule: sqrt(n), odd, at least 3; for ema the smoothing factor is 2 / (window + 1)."""
    order = np.argsort(np.asarray(x, float), kind="stable")
    xs = np.asarray(x, float)[order]
    ys = np.asarray(y, float)[order]
    n = len(ys)
    if window is None:
        window = max(3, int(math.sqrt(n)) | 1)
    window = min(window, n)
    if method == "ema":
        alpha = 2 / (window + 1)
        out = np.empty(n)
        acc = ys[0]
        for i, v in enumerate(ys):
            acc = alpha * v + (1 - alpha) * acc
            out[i] = acc
    else:
        half = window // 2
        pad = np.pad(ys, half, mode="edge")
        views = np.lib.stride_tricks.sliding_window_view(pad, window)[:n]
        out = views.mean(axis=1) if method == "sma" else np.median(views, axis=1)
    return Model(f"moving-average:{method}", r_squared(ys, out), {"window": float(window)},
                 tuple(float(v) for v in xs), tuple(float(v) for v in out))


def _kernel_weights(d: np.ndarray, kernel: str) -> np.ndarray:
    return np.exp(-0.5 * d * d) if kernel == "gaussian" else (np.abs(d) <= 1).astype(float)


def kernel_regression(x: Sequence[float], y: Sequence[float], kernel: str = "gaussian",
                      bandwidth: float | None = None) -> Model:
    """Nadaraya-Watson estimator.  Bandwidth by leave-one-out cross-validation over a grid around
    Silverman's rule of thumb (1.06 sd n^-1/5); the chosen bandwidth is kept in params."""
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    n = len(x)
    sd = float(np.std(x)) or 1.0
    silverman = 1.06 * sd * n ** (-1 / 5)

    def smooth(h: float, at: np.ndarray, loo: bool = False) -> np.ndarray:
        w = _kernel_weights((at[:, None] - x[None, :]) / h, kernel)
        if loo:
            np.fill_diagonal(w, 0.0)
        s = w.sum(axis=1)
        return np.where(s > 0, (w * y).sum(axis=1) / np.where(s > 0, s, 1), y.mean())

    if bandwidth is None:
        grid = silverman * np.geomspace(0.2, 3.0, 12)
        sample = x if n <= 400 else x[np.linspace(0, n - 1, 400).astype(int)]  # keep LOO O(400 n)
        scores = []
        for h in grid:
            pred = smooth(h, x, loo=True) if n <= 400 else smooth(h, sample)
            target = y if n <= 400 else y[np.linspace(0, n - 1, 400).astype(int)]
            scores.append(float(((pred - target) ** 2).mean()))
        bandwidth = float(grid[int(np.argmin(scores))])
    fitted = smooth(bandwidth, x)
    gx = np.linspace(x.min(), x.max(), min(n, 100))
    return Model(f"kernel:{kernel}", r_squared(y, fitted), {"bandwidth": bandwidth},
                 tuple(float(v) for v in gx), tuple(float(v) for v in smooth(bandwidth, gx)))


MAX_FIT_POINTS = 2000  # a series longer than this is fitted on this many points, evenly spaced


def fit_all(x: Sequence[float], y: Sequence[float]) -> list[Model]:
    """Every model the tool offers for one series, best regression first.  A long series is thinned
    to MAX_FIT_POINTS evenly spaced points first: the kernel regression's weights are n x n (a
    pulled series of 20,000 points asked for 2.98 GiB, issue #37), and a picture of 2,000 points shows
    the same trend."""
    if len(x) < 3:
        return []
    if len(x) > MAX_FIT_POINTS:
        keep = np.linspace(0, len(x) - 1, MAX_FIT_POINTS).astype(int)
        x, y = np.asarray(x, float)[keep], np.asarray(y, float)[keep]
    return [best_regression(x, y), regressogram(x, y), moving_average(x, y, "sma"), moving_average(x, y, "smm"),
            moving_average(x, y, "ema"), kernel_regression(x, y, "gaussian"), kernel_regression(x, y, "box")]
