import { useHarness } from "../support/harness";
import { workerHarness } from "../support/worker-harness";
import { requestLimitsSuite } from "../suites/request-limits.suite";

requestLimitsSuite(useHarness(workerHarness));
