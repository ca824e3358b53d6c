"""Write the R loo ``relative_eff`` reference values of tests/core/test_ess.py.

R is not installed where this package is developed, so the reference is a direct, slow,
line-by-line transcription of R loo's code (``R/effective_sample_sizes.R`` of loo 2.5.x,
the RStan estimator; loo >= 2.8 calls ``posterior::ess_basic`` instead), written
independently of `loo_adapt.core.ess` and sharing no code with it:

* ``relative_eff.array``: ``apply(x, 3, ess_rfun) / S`` on the likelihood values
  ``exp(log_lik)`` (x is R's iterations x chains x n; here (chains, draws, n));
* ``ess_rfun``: per chain ``autocovariance(sims[, i])``, then Geyer's initial positive and
  monotone sequences with R's 1-based indices kept literally (``rho_hat_t[t + 1]``), the
  "improved" ``tau_hat <- -1 + 2 * sum(rho_hat_t[1:max_t]) + rho_hat_t[max_t + 1]`` with R's
  ``1:0`` when ``max_t`` is 0, and ``max(tau_hat, 1 / log10(ess))``;
* ``autocovariance``: zero padding to ``2 * fft_next_good_size(N)``, a full complex FFT,
  R's unnormalised inverse FFT (numpy's ``ifft`` times the length), ``Re(ac)[1:N] / (N^2 * 2)``.

Run from the repository root (any numpy; no arviz needed):

    python tests/data/ess_reference/make_reference.py

Writes ``<case>.csv`` with one column ``r_eff`` (17 significant digits) per case of
``cases()``; the inputs are rebuilt from their seeds by the tests.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FIXTURE = HERE.parents[0] / "cmdstan" / "logistic_normal" / "sample"


# ---------------------------------------------------------------- R loo, transcribed
def r_fft_next_good_size(N):
    if N <= 2:
        return 2
    while True:
        m = N
        while m % 2 == 0:
            m = m // 2
        while m % 3 == 0:
            m = m // 3
        while m % 5 == 0:
            m = m // 5
        if m <= 1:
            return N
        N = N + 1


def r_autocovariance(y):
    N = len(y)
    M = r_fft_next_good_size(N)
    Mt2 = 2 * M
    yc = y - np.mean(y)
    yc = np.concatenate([yc, np.zeros(Mt2 - N)])
    transform = np.fft.fft(yc)
    ac = np.fft.ifft(np.conj(transform) * transform) * Mt2  # R: fft(, inverse = TRUE)
    return np.real(ac)[0:N] / (N**2 * 2)


def r_ess_rfun(sims):
    """sims: iterations x chains (R's layout)."""
    sims = np.asarray(sims, dtype=float)
    if sims.ndim == 1:
        sims = sims[:, None]
    chains = sims.shape[1]
    n_samples = sims.shape[0]
    acov = np.column_stack([r_autocovariance(sims[:, i]) for i in range(chains)])
    chain_mean = sims.mean(axis=0)
    mean_var = np.mean(acov[0, :]) * n_samples / (n_samples - 1)
    var_plus = mean_var * (n_samples - 1) / n_samples
    if chains > 1:
        var_plus = var_plus + np.var(chain_mean, ddof=1)

    def R(v, i):  # R's v[i], 1-based
        return v[i - 1]

    def acov_mean_row(i):  # R's mean(acov[i, ]), 1-based row
        return np.mean(acov[i - 1, :])

    rho_hat_t = np.zeros(n_samples)
    t = 0
    rho_hat_even = 1.0
    rho_hat_t[t + 1 - 1] = rho_hat_even
    rho_hat_odd = 1 - (mean_var - acov_mean_row(t + 2)) / var_plus
    rho_hat_t[t + 2 - 1] = rho_hat_odd
    while (t < acov.shape[0] - 5 and not np.isnan(rho_hat_even + rho_hat_odd)
           and rho_hat_even + rho_hat_odd > 0):
        t = t + 2
        rho_hat_even = 1 - (mean_var - acov_mean_row(t + 1)) / var_plus
        rho_hat_odd = 1 - (mean_var - acov_mean_row(t + 2)) / var_plus
        if rho_hat_even + rho_hat_odd >= 0:
            rho_hat_t[t + 1 - 1] = rho_hat_even
            rho_hat_t[t + 2 - 1] = rho_hat_odd
    max_t = t
    if rho_hat_even > 0:
        rho_hat_t[max_t + 1 - 1] = rho_hat_even
    t = 0
    while t <= max_t - 4:
        t = t + 2
        if R(rho_hat_t, t + 1) + R(rho_hat_t, t + 2) > R(rho_hat_t, t - 1) + R(rho_hat_t, t):
            rho_hat_t[t + 1 - 1] = (R(rho_hat_t, t - 1) + R(rho_hat_t, t)) / 2
            rho_hat_t[t + 2 - 1] = R(rho_hat_t, t + 1)
    ess = chains * n_samples
    # R's 1:max_t; for max_t = 0 it is c(1, 0), and index 0 selects nothing
    idx = list(range(1, max_t + 1)) if max_t >= 1 else [1]
    tau_hat = -1 + 2 * sum(R(rho_hat_t, i) for i in idx) + R(rho_hat_t, max_t + 1)
    floor = 1 / np.log10(ess)
    tau_hat = tau_hat if (np.isnan(tau_hat) or tau_hat >= floor) else floor  # R's max()
    return ess / tau_hat


def r_relative_eff(lik):
    """R ``relative_eff.array`` of likelihood values given as (chains, draws, n)."""
    x = np.transpose(np.asarray(lik, dtype=float), (1, 0, 2))  # R: iterations x chains x n
    S = x.shape[0] * x.shape[1]
    return np.array([r_ess_rfun(x[:, :, i]) for i in range(x.shape[2])]) / S


# ---------------------------------------------------------------- the cases
def fixture_log_lik() -> np.ndarray:
    """(4, 250, 54) log_lik of the logistic_normal CmdStan fixture."""
    import pandas as pd

    out = []
    for f in sorted(FIXTURE.glob("logistic_normal-*_[1-4].csv")):
        df = pd.read_csv(f, comment="#")
        cols = sorted((c for c in df.columns if c.startswith("log_lik.")),
                      key=lambda c: int(c.split(".")[1]))
        out.append(df[cols].to_numpy(dtype=float))
    return np.stack(out, axis=0)


def ar1(rng, phi, n_chains, n_draws, n_cols):
    """AR(1) chains with unit marginal variance, (chains, draws, cols); phi per column."""
    phi = np.broadcast_to(np.asarray(phi, dtype=float), (n_cols,))
    x = np.empty((n_chains, n_draws, n_cols))
    x[:, 0] = rng.normal(size=(n_chains, n_cols))
    eps = rng.normal(size=(n_chains, n_draws, n_cols)) * np.sqrt(1 - phi**2)
    for t in range(1, n_draws):
        x[:, t] = phi * x[:, t - 1] + eps[:, t]
    return x


def normal_log_lik(z, y, offsets=None):
    """log N(y_i | mu, 1) with mu the draws z (chains, draws, cols) scaled to a posterior."""
    mu = 0.2 * z
    if offsets is not None:
        mu = mu + offsets[:, None, None]
    return -0.5 * np.log(2 * np.pi) - 0.5 * (y[None, None, :] - mu) ** 2


def cases() -> dict[str, np.ndarray]:
    """name -> log_lik (chains, draws, n); the reference is R's relative_eff(exp(log_lik))."""
    rng = np.random.default_rng(20251126)
    phis = np.repeat([0.0, 0.3, 0.6, 0.9, -0.3, 0.97], 6)
    y = rng.normal(0.0, 1.5, size=phis.size)
    mixing = normal_log_lik(ar1(rng, phis, 4, 1000, phis.size), y)
    # 251 draws is not 2-3-5-smooth: R's autocovariance is inflated by M / N (M = 256), which
    # matters with several chains through var(chain means); the chains' means differ
    y2 = rng.normal(0.0, 1.5, size=8)
    quirk = normal_log_lik(ar1(rng, 0.5, 4, 251, 8), y2,
                           offsets=np.array([0.0, 0.03, -0.02, 0.01]))
    # strongly autocorrelated columns: Geyer's sequence runs to long lags
    y3 = np.array([-2.0, -0.5, 0.5, 2.5])
    long_lag = normal_log_lik(ar1(rng, np.array([0.995, 0.99, 0.98, 0.999]), 2, 2000, 4), y3)
    y4 = rng.normal(size=5)
    one_chain = normal_log_lik(ar1(rng, 0.4, 1, 500, 5), y4)
    return {
        "fixture": fixture_log_lik(),
        "mixing": mixing,
        "quirk251": quirk,
        "long_lag": long_lag,
        "one_chain": one_chain,
    }


def main() -> None:
    import pandas as pd

    for name, ll in cases().items():
        r = r_relative_eff(np.exp(ll))
        pd.DataFrame({"r_eff": r}).to_csv(HERE / f"{name}.csv", index=False,
                                          float_format="%.17g")
        print(name, ll.shape, np.round(r[:6], 4))


if __name__ == "__main__":
    main()
