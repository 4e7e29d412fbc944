import { useHarness } from "../support/harness";
import { workerHarness } from "../support/worker-harness";
import { docsSuite } from "../suites/docs.suite";

docsSuite(useHarness(workerHarness));
