"""observability: metrics a user can scrape or watch (Prometheus text, StatsD push).

Imports nothing else of kcoord; the serving path feeds it.
"""
