"""The offline site's build steps (make site): widget frames, vendored scripts, the jieba dictionary."""
