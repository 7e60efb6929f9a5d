"""FedIPS's losses and the regression-EM written plainly, the oracles of the library's
FedIPS (Li & Ouyang, "Federated Unbiased Learning to Rank", the FedIPS paper; Wang et
al., "Position Bias Estimation for Unbiased Learning to Rank in Personal Search", WSDM
2018).  Nothing here imports foltr_jax: the losses are JAX (the tests differentiate them)
and the EM is NumPy in float64."""

import jax.numpy as jnp
import numpy as np


def hinge_bound(params, features, valid, shown_index):
    """h_{q,d}(w) = Σ_{d' ∈ D_q} max(0, 1 − (f(d) − f(d'))) (eq. 4) for the candidates d at
    ``shown_index`` [K], f(x) = x·w; ``valid`` [W] marks the query's real candidates."""
    scores = features @ params["w"]
    shown = scores[shown_index]
    margins = jnp.maximum(1.0 - (shown[:, None] - scores[None, :]), 0.0)
    return jnp.sum(jnp.where(valid[None, :], margins, 0.0), axis=1)


def ips_hinge_loss(params, features, valid, shown_index, clicks, propensities):
    """Eq. 7 for one query: Σ_k c_k · h_{q,d_k}(w) / p_k over the shown positions k.

    ``features`` [W, F] the query's candidates, ``shown_index`` [K] the candidate shown at
    each position, ``clicks`` [K] (0/1), ``propensities`` [K] (all 1: the unweighted
    FedAvg loss)."""
    h = hinge_bound(params, features, valid, shown_index)
    return jnp.sum(jnp.where(clicks > 0, clicks * h / propensities, 0.0))


def full_information_loss(params, features, valid, shown_index, relevance):
    """Eq. 8 with the hinge surrogate: Σ_k r_k · h_{q,d_k}(w) over the shown positions."""
    return jnp.sum(relevance * hinge_bound(params, features, valid, shown_index))


def regression_em(features, positions, clicks, n_positions: int, iterations: int, lr: float):
    """Batch federated regression-EM over the click logs of C clients under the PBM
    c = e · r, impression by impression.

    ``features`` [C, N, F], ``positions`` int [C, N] (0-based), ``clicks`` [C, N] (0/1).
    Relevance model F: γ = σ(x·v + b), starting at v = 0, b = 0; θ starts at 0.5.  An
    iteration: each impression's posteriors, a click P(E = 1) = P(R = 1) = 1, a skip
    P(E = 1) = θ(1 − γ)/(1 − θγ) and P(R = 1) = (1 − θ)γ/(1 − θγ); the M-step
    θ_k = Σ P(E = 1) / impressions at position k over every client; F steps by ``lr``
    times the mean over the clients of the gradient of each client's mean cross-entropy
    of γ against P(R = 1).  Returns (θ [n_positions], (v, b))."""
    features = np.asarray(features, np.float64)
    positions = np.asarray(positions)
    clicks = np.asarray(clicks, np.float64)
    theta = np.full(n_positions, 0.5)
    v, b = np.zeros(features.shape[-1]), 0.0
    for _ in range(iterations):
        examined = np.zeros(n_positions)
        shown = np.zeros(n_positions)
        grad_v, grad_b = np.zeros_like(v), 0.0
        for x, k, c in zip(features, positions, clicks):  # one client
            gamma = 1.0 / (1.0 + np.exp(-(x @ v + b)))
            t = theta[k]
            denom = np.maximum(1.0 - t * gamma, 1e-6)
            e = np.where(c > 0, 1.0, t * (1.0 - gamma) / denom)
            r = np.where(c > 0, 1.0, (1.0 - t) * gamma / denom)
            np.add.at(examined, k, e)
            np.add.at(shown, k, 1.0)
            # d/dlogit of the mean cross-entropy −[r log γ + (1 − r) log(1 − γ)]: γ − r
            grad_v += x.T @ (gamma - r) / len(k)
            grad_b += np.sum(gamma - r) / len(k)
        theta = examined / np.maximum(shown, 1e-9)
        v = v - lr * grad_v / len(features)
        b = b - lr * grad_b / len(features)
    return theta, (v, b)
