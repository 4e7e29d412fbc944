import { useHarness } from "../support/harness";
import { postgresHarness } from "../support/node-harness";
import { requestLimitsSuite } from "../suites/request-limits.suite";

requestLimitsSuite(useHarness(postgresHarness));
