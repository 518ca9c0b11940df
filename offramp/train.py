"""Training the BiLSTM offramp (torch) and exporting it to the numpy scorer the device runs.

Input: the last pilot output's features of each devel utterance and whether the device's full
decode got that utterance wrong (WER > 0.1). A seeded 20 % of utterances is held out for early
stopping and for the reported ROC AUC.
"""

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from torch import nn
from torch.nn.utils.rnn import pack_sequence

from pasu.offramp.features import FEATURE_DIM, OfframpFeatures
from pasu.offramp.scores import BiLstmScorer

HIDDEN = 34  # 10.9 k parameters, the size the paper gives (about 11 k)


class BiLstmOfframp(nn.Module):
    def __init__(self, hidden: int = HIDDEN):
        super().__init__()
        self.lstm = nn.LSTM(FEATURE_DIM, hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, 1)

    def forward(self, sequences: list[torch.Tensor]) -> torch.Tensor:
        _, (state, _) = self.lstm(pack_sequence(sequences, enforce_sorted=False))
        return self.head(torch.cat([state[0], state[1]], dim=1)).squeeze(1)


def to_scorer(model: BiLstmOfframp, mean: np.ndarray, std: np.ndarray) -> BiLstmScorer:
    lstm = model.lstm

    def array(tensor: torch.Tensor) -> np.ndarray:
        return tensor.detach().cpu().numpy().astype(np.float32)

    return BiLstmScorer(
        {
            "forward_ih": array(lstm.weight_ih_l0),
            "forward_hh": array(lstm.weight_hh_l0),
            "forward_b": array(lstm.bias_ih_l0 + lstm.bias_hh_l0),
            "backward_ih": array(lstm.weight_ih_l0_reverse),
            "backward_hh": array(lstm.weight_hh_l0_reverse),
            "backward_b": array(lstm.bias_ih_l0_reverse + lstm.bias_hh_l0_reverse),
            "head_w": array(model.head.weight[0]),
            "head_b": array(model.head.bias),
            "feature_mean": mean.astype(np.float32),
            "feature_std": std.astype(np.float32),
        }
    )


def train_bilstm(
    features: list[OfframpFeatures],
    wrong: np.ndarray,
    epochs: int = 80,
    seed: int = 0,
    patience: int = 12,
) -> tuple[BiLstmScorer, dict]:
    """Fit on (features, device got it wrong); returns the scorer and held-out metrics."""
    torch.manual_seed(seed)
    random = np.random.default_rng(seed)
    labels = np.asarray(wrong, np.float32)
    order = random.permutation(len(features))
    held_out = order[: max(1, len(order) // 5)]
    train_rows = order[len(held_out) :]
    stacked = np.concatenate([features[i].sequence() for i in train_rows])
    mean, std = stacked.mean(axis=0), stacked.std(axis=0) + 1e-3
    inputs = [torch.from_numpy((f.sequence() - mean) / std) for f in features]
    targets = torch.from_numpy(labels)
    model = BiLstmOfframp()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.BCEWithLogitsLoss()

    def held_out_loss() -> float:
        with torch.no_grad():
            logits = model([inputs[i] for i in held_out])
            return float(loss_fn(logits, targets[held_out]))

    best_loss, best_state, stale = float("inf"), None, 0
    for _ in range(epochs):
        model.train()
        for batch in np.array_split(random.permutation(train_rows), max(1, len(train_rows) // 64)):
            optimizer.zero_grad()
            loss = loss_fn(model([inputs[i] for i in batch]), targets[batch])
            loss.backward()
            optimizer.step()
        model.eval()
        loss = held_out_loss()
        if loss < best_loss - 1e-4:
            best_loss, stale = loss, 0
            best_state = {k: v.clone() for k, v in model.state_dict().items()}
        else:
            stale += 1
            if stale >= patience:
                break
    model.load_state_dict(best_state)
    scorer = to_scorer(model, mean, std)
    held_scores = np.array([scorer(features[i]) for i in held_out])
    held_labels = labels[held_out]
    metrics = {
        "utterances": len(features),
        "held_out": len(held_out),
        "wrong_share": float(labels.mean()),
        "held_out_loss": best_loss,
        "held_out_auc": float(roc_auc_score(held_labels, held_scores))
        if 0 < held_labels.sum() < len(held_labels)
        else None,
        "parameters": scorer.num_parameters,
    }
    return scorer, metrics
