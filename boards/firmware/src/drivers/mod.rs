//! Console UART drivers (polled transmit only; the firmware never reads the console).

pub mod imx_uart;
pub mod ns16550;
pub mod pl011;

pub trait Uart {
    fn write_byte(&self, byte: u8);
    /// Waits until every byte written has left the transmitter.
    fn flush(&self);
}
