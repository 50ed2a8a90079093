"""The page, one module per part: the editor on top (editor), then the tabs (player, compare, exactness,
statistics, sessions). Each module holds its handlers, `layout(page)` that places its components
and `wire(page)` that connects their events; app.ui assembles them in order."""
