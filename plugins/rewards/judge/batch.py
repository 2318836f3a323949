"""The async batch interface both backends share: ``judge_one`` is theirs, the rest is here."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable

from reasonrl.plugins.rewards.judge.formats import JudgeResult, Submission


class BatchJudge:
    """Subclasses set ``self._executor`` (a thread pool) and implement blocking ``judge_one``."""

    _executor: ThreadPoolExecutor

    def judge_one(self, submission: Submission) -> JudgeResult:
        raise NotImplementedError

    def probe(self) -> None:
        """Check that the backend can judge at all; raise if not. Nothing to check by default
        (a SandboxFusion server that does not answer gives ``judge_error`` per test)."""

    async def judge(
        self, submissions: Iterable[Submission], on_result: Callable[[JudgeResult], None] | None = None
    ) -> list[JudgeResult]:
        """Judge many submissions concurrently; results in submission order."""
        loop = asyncio.get_running_loop()

        async def one(submission: Submission) -> JudgeResult:
            result = await loop.run_in_executor(self._executor, self.judge_one, submission)
            if on_result is not None:
                on_result(result)
            return result

        return list(await asyncio.gather(*(one(s) for s in submissions)))

    def judge_sync(
        self, submissions: Iterable[Submission], on_result: Callable[[JudgeResult], None] | None = None
    ) -> list[JudgeResult]:
        return asyncio.run(self.judge(list(submissions), on_result))

    def close(self) -> None:
        self._executor.shutdown(wait=False)

    def __enter__(self):
        return self

    def __exit__(self, *_exc) -> None:
        self.close()
