//! Console UART drivers (polled transmit only; the firmware never reads the console).

#[cfg(any(feature = "qemu-virt", feature = "raspi4b", feature = "raspi3b"))]
pub mod pl011;

#[cfg(feature = "imx8mp-evk")]
pub mod imx_uart;

pub trait Uart {
    fn write_byte(&self, byte: u8);
    /// Waits until every byte written has left the transmitter.
    fn flush(&self);
}
