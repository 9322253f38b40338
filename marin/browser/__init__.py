"""marin.browser: a read-only web app over experiment outputs on any fsspec storage.

It knows the storage layout and the record formats (docs/records.md) and nothing of the
executor, so it can browse a bucket written by any version of marin, including one that is
running right now. Entry points: `marin.browser.app.serve(roots, ...)` and
`marin.browser.app.create_app(roots) -> Starlette`.
"""
