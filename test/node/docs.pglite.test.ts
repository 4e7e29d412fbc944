import { useHarness } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";
import { docsSuite } from "../suites/docs.suite";

docsSuite(useHarness(pgliteHarness));
