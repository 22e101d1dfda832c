"""Generated task ids sort in enqueue order: ties of one priority and millisecond stay FIFO."""

from __future__ import annotations

import threading

from django_ledger.tasks.resolve import random_id


def test_ids_from_one_process_sort_in_the_order_they_were_made() -> None:
    ids = [random_id() for _ in range(20_000)]  # many fall in one millisecond
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


def test_ids_made_on_many_threads_are_distinct_and_ordered_per_thread() -> None:
    made: dict[int, list[str]] = {}

    def make(n: int) -> None:
        made[n] = [random_id() for _ in range(2_000)]

    threads = [threading.Thread(target=make, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [i for ids in made.values() for i in ids]
    assert len(set(every)) == len(every)
    assert all(ids == sorted(ids) for ids in made.values())
