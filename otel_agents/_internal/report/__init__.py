"""What the CLI's `runs`, `cost` and `explain` and the web page show, computed once: the rows of a
runs list and of a cost report, from the store's readers. The CLI renders them as tables and JSON,
the page as HTML; neither computes a figure of its own."""
