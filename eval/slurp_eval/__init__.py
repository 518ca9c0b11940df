"""SLURP evaluation (PASU §7): WER and intent accuracy against offload ratio and latency.

Every system answers the same recordings, from cached per-recording runs (`eval.corpus_runs`):
- OnDevice: ESPnet's search after ingestion (needs the torch checkpoint);
- Ours-OnDevice: our engine (pilots, beam collapse, early termination, CTC leap), never offloading;
- AllOffload: every recording to the cloud;
- NaiveHybrid: offload at random with probability α;
- Ours-PPL / Ours-LSTM: the offramp scores of the last pilot output, thresholds swept;
- Ours-after-full-decode (PPL / LSTM): the same scores on the full decode's output.

Latency of an offloaded recording = the device's work before offloading + the upload of the FLAC
waveform over the link + the link's round trip + the cloud's measured compute.

Modules: `systems` (answers, latencies, sweeps), `targets` (the paper's comparisons),
`running` (runs and merges), `report` (report and predictions), `plots`.
"""
