"""Explaining a run: where its tokens and cost went, what repeated, why it stopped.

One analysis (`analysis.py`) over spans in a neutral form (`model.Span`), whichever reader made
them (`readers.py`: the embedded store, Jaeger's query API, an OTLP JSON file, `ReadableSpan`s in
process), so one run gives one `Explanation` wherever its trace is read from; its findings
(`findings.py`) and its text view (`text.py`) read only the `Explanation`.
"""
