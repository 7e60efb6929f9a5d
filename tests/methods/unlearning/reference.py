"""The unlearning replay's round written plainly in NumPy, the oracle of the library's
replay (unlearning paper, "How to Forget Clients in Federated Online Learning to Rank?",
ECIR 2024, §3.2, eqs. 1-2; FedEraser's calibration).  It imports nothing from foltr_jax."""

import numpy as np


def calibrated(new_update, stored_update):
    """ΔM^unlearn = ‖ΔM‖ · ΔM′ / ‖ΔM′‖ (eq. 2): the new update's direction at the stored
    update's length; a zero new update stays zero."""
    new_update = np.asarray(new_update, np.float64)
    length = np.linalg.norm(new_update)
    if length == 0:
        return np.zeros_like(new_update)
    return np.linalg.norm(np.asarray(stored_update, np.float64)) * new_update / length


def unlearning_round(global_model, new_updates, stored_updates, weights):
    """M ← M + Σ_i w_i ΔM_i^unlearn / Σ_i w_i (eq. 1), client by client; the forgotten
    clients have w_i = 0.  ``new_updates``/``stored_updates`` [n_clients, d], ``weights``
    [n_clients] (FedAvg's n_i)."""
    total = np.zeros(np.shape(global_model))
    for new, stored, weight in zip(new_updates, stored_updates, weights):
        if weight > 0:
            total += weight * calibrated(new, stored)
    return np.asarray(global_model, np.float64) + total / np.sum(weights)
