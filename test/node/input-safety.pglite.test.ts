import { useHarness } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";
import { inputSafetySuite } from "../suites/input-safety.suite";

inputSafetySuite(useHarness(pgliteHarness));
