declare module 'kwop:reconciler/log@0.2.0' {
  /**
   * Write one log line. The host rate-limits plugin logs.
   */
  export function log(level: Level, message: string): void;
  /**
   * Log levels, as in `tracing`.
   * # Variants
   * 
   * ## `"trace"`
   * 
   * ## `"debug"`
   * 
   * ## `"info"`
   * 
   * ## `"warn"`
   * 
   * ## `"error"`
   */
  export type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error';
}
