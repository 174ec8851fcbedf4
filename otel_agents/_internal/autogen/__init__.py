"""AutoGen's side: the patches (through the wrapping ledger), the facts they rely on, tap, runtimes, instrumentor."""
