"""Running the vendor suite: loading the backend, deciding its levels, running the checks under their
deadlines, and turning outcomes into clause verdicts."""
