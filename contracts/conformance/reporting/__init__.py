"""The report of a run: sections and verdicts, their renderings (terminal, JSON, JUnit XML, Markdown),
certification bundles, and the secrets kept out of all of them."""
