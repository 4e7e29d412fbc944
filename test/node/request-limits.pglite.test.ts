import { useHarness } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";
import { requestLimitsSuite } from "../suites/request-limits.suite";

requestLimitsSuite(useHarness(pgliteHarness));
