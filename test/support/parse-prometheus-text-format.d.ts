/** The parser has no types of its own: what test/node/metrics.test.ts reads of its output (prom2json's shape). */
declare module "parse-prometheus-text-format" {
  export interface Sample {
    labels?: Record<string, string>;
    value?: string;
  }
  export interface MetricFamily {
    name: string;
    help: string;
    type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED";
    metrics: Sample[];
  }
  export default function parsePrometheusTextFormat(text: string): MetricFamily[];
}
