"""The "OnDevice" reference of the PASU paper: our model in torch, decoded after ingestion with
ESPnet's own `BatchBeamSearch` and `CTCPrefixScorer`. Speedups of the device runtime are measured
against this, which is what an ESPnet user gets."""

from dataclasses import dataclass

import numpy as np
import torch
from espnet.nets.batch_beam_search import BatchBeamSearch
from espnet.nets.scorers.ctc import CTCPrefixScorer

from pasu.models.asr_model import LateContextModel


@dataclass(frozen=True)
class BaselineResult:
    token_ids: list[int]
    score: float


class EspnetBaseline:
    """Full joint CTC/attention beam search (beam 5, CTC weight 0.3) with ESPnet's modules."""

    def __init__(self, model: LateContextModel, beam_size: int = 5, ctc_weight: float = 0.3):
        self.model = model.eval()
        eos = model.eos
        self.search = BatchBeamSearch(
            scorers={"decoder": model.decoder, "ctc": CTCPrefixScorer(ctc=model.ctc, eos=eos)},
            weights={"decoder": 1.0 - ctc_weight, "ctc": ctc_weight},
            beam_size=beam_size,
            vocab_size=model.config.vocab_size,
            sos=model.sos,
            eos=eos,
            token_list=None,
            pre_beam_score_key="full",
        ).eval()

    @torch.no_grad()
    def decode_encoded(self, encoded: torch.Tensor) -> BaselineResult:
        """Beam search over one utterance's encoder output (T, d)."""
        best = self.search(x=encoded, maxlenratio=0.0, minlenratio=0.0)[0]
        # ESPnet can end a hypothesis with <eos> twice at its length limit: drop both.
        tokens = [int(t) for t in best.yseq[1:].tolist() if int(t) not in (0, self.search.eos)]
        return BaselineResult(tokens, float(best.score))

    @torch.no_grad()
    def decode(self, features: np.ndarray) -> BaselineResult:
        """Encode CMVN-normalised features (frames, 80) and decode them."""
        x = torch.from_numpy(np.asarray(features, np.float32))[None]
        encoded, _ = self.model.encode(x, torch.tensor([x.size(1)]))
        return self.decode_encoded(encoded[0])
