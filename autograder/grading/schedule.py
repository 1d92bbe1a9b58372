"""Local threads or a Dask cluster behind one interface: submit a job, wait for some, close.

The instructor's process keeps the queue, the locks and the gradebook either way; a Dask
worker gets the assignment's work once (scattered) and each submission's bytes with its job."""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from autograder.grading.jobs import GradeJob
from autograder.grading.pool import POOL
from autograder.grading.submission import grade_submission
from autograder.grading.work import AssignmentWork


class Local:
    """A thread pool of `workers` threads, each driving one sandbox of this process."""

    def __init__(self, work: AssignmentWork, workers: int, keep_sandboxes: bool = False):
        self._work, self._keep = work, keep_sandboxes
        self._executor = ThreadPoolExecutor(
            max_workers=max(1, workers), thread_name_prefix="grader"
        )
        self.in_flight = max(1, workers) * 2  # jobs queued ahead (their bytes are in memory)

    def submit(self, job: GradeJob):
        return self._executor.submit(grade_submission, job, self._work)

    def wait(self, futures) -> set:
        return wait(futures, return_when=FIRST_COMPLETED).done

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        if not self._keep:  # a caller grading several assignments may reuse them
            POOL.close()


class Dask:
    """A Dask cluster at `address`: its workers start their own sandboxes."""

    def __init__(self, work: AssignmentWork, address: str):
        from distributed import Client

        self._client = Client(address)
        # once per worker, not once per submission
        self._work = self._client.scatter(work, broadcast=True)
        self.in_flight = 1_000_000  # the scheduler queues them

    def submit(self, job: GradeJob):
        return self._client.submit(grade_submission, job, self._work, pure=False)

    def wait(self, futures) -> set:
        from distributed import wait as dask_wait

        return dask_wait(futures, return_when="FIRST_COMPLETED").done

    def close(self) -> None:
        self._client.close()
